// The two-pass column sums (column_sums.h) at sizes the other twin tests do not reach, and the
// head's paths kernels_twin_test leaves out: part of kernels_twin_test (the same skip without a
// GPU: every KernelsTwinColumns test is SKIPPED with the runtime's reason).
//
// Column sums: N = 70,001 rows, more than kColumnSliceRows · kMaxColumnSlices = 65,536, so the
// slices grow past 64 rows (69 rows, 1,015 slices, the last one short) and the second pass adds
// 1,015 partials per column; C = 33 columns (a full tile of 32 and a tile of one). The inputs are
// small integers (dy in {-3..3}, x̂ = x - mean with mean 0 and rstd 1, x in {-3..3}), so every
// partial sum is an integer below 2^24 and exact in fp32 in ANY order: the result must equal the
// integer sum exactly, and a row counted twice or dropped (a slice boundary off by one) or a
// partial read from the wrong slot cannot hide inside a rounding bound.
//
// The head without dx (gpt_embed_head.cc: the vocab-parallel rank that needs no dh):
// matmul_nt_backward with dx == nullptr accumulates dWt alone (GEMM bound 5e-5, relative to
// max(1, max|ref|), as kernels_twin_test's). Cross-entropy: cross_entropy_twin_test.cc.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/twin_test_util.h"

namespace llmp {
namespace {

using test::Dev;
using test::DevF;
using test::rel_err;
using test::rnd;
using test::Vec;

using KernelsTwinColumns = test::GpuTwin;

/// n integers in [-3, 3] as floats.
Vec small_ints(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> u(-3, 3);
  Vec v(n);
  for (float& x : v) x = static_cast<float>(u(g));
  return v;
}

constexpr int kN = 70001, kC = 33;

TEST_F(KernelsTwinColumns, ColumnSumsPastTheSliceCapAreExact) {
  const Vec dy = small_ints(size_t{kN} * kC, 1), x = small_ints(size_t{kN} * kC, 2);
  const Vec mean(kN, 0.0f), rstd(kN, 1.0f);
  Vec sum_dy(kC, 0.0f), sum_dyx(kC, 0.0f);  // integers: exact in fp32
  for (int64_t n = 0; n < kN; ++n)
    for (int c = 0; c < kC; ++c) {
      sum_dy[c] += dy[n * kC + c];
      sum_dyx[c] += dy[n * kC + c] * x[n * kC + c];
    }
  // The kernels accumulate (+=) into a nonzero start; dw twice: without db, then with it.
  Vec db_ref(kC), dw_ref(kC);
  for (int c = 0; c < kC; ++c) db_ref[c] = 5.0f + sum_dy[c], dw_ref[c] = -7.0f + 2 * sum_dyx[c];
  DevF dy_d(dy), x_d(x), m_d(mean), r_d(rstd), db_d(Vec(kC, 5.0f)), dw_d(Vec(kC, -7.0f)),
      db2_d(Vec(kC, 5.0f));
  cuda::residual_bias_backward(db_d.p, dy_d.p, kN, kC);
  cuda::layernorm_backward_weight(dw_d.p, /*db=*/nullptr, dy_d.p, x_d.p, m_d.p, r_d.p, kN, kC);
  cuda::layernorm_backward_weight(dw_d.p, db2_d.p, dy_d.p, x_d.p, m_d.p, r_d.p, kN, kC);
  EXPECT_EQ(db_d.get(), db_ref);
  EXPECT_EQ(db2_d.get(), db_ref);
  EXPECT_EQ(dw_d.get(), dw_ref);
}

TEST_F(KernelsTwinColumns, MatmulNtBackwardWithoutDxAccumulatesDWtAlone) {
  const int N = 64, C = 48, OC = 80;
  const Vec x = rnd(size_t{N} * C, 4), Wt = rnd(size_t{OC} * C, 5), dy = rnd(size_t{N} * OC, 6);
  Vec dWt = rnd(size_t{OC} * C, 7);  // nonzero: += is checked
  DevF x_d(x), Wt_d(Wt), dy_d(dy), dWt_d(dWt);
  cpu::matmul_nt_backward(nullptr, dWt.data(), dy.data(), x.data(), Wt.data(), N, C, OC);
  cuda::matmul_nt_backward(nullptr, dWt_d.p, dy_d.p, x_d.p, Wt_d.p, N, C, OC);
  EXPECT_LE(rel_err(dWt_d.get(), dWt, "matmul_nt dWt (no dx)"), 5e-5f);
}

}  // namespace
}  // namespace llmp
