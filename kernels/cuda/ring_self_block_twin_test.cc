// Ring self-attention's kernels (ring_self_block.h) on the GPU against their kernels/cpu twins:
// part of kernels_twin_test (the same skip without a GPU: every KernelsTwinRingSelfBlock test is
// SKIPPED with the runtime's reason).
//
// The core's whole sequence of calls for one rank (common/cp/ring_self_attention.cc), run once
// through kernel_ops(Device::kCPU) on host buffers and once through kernel_ops(Device::kCUDA)
// (the CUDA table, linked) on device buffers: rank r = 1 of p = 3, so chunk 0 lies before every
// local query, chunk 1 is the diagonal block and chunk 2 lies in the future (never multiplied:
// its block of S and dP starts as NaN, and the softmaxes must write exactly 0 over it).
//   forward   S_c = (Q/√hs) K_cᵀ (c = 0, 1); P = causal_softmax_rows(g0 = Tl); Y += P_c V_c
//   backward  dP_c = dO V_cᵀ; dS = causal_softmax_rows_backward; dV_c += P_cᵀ dO;
//             dK_c += dS_cᵀ Q; dQ += dS_c K_c
// Every chunk is its own (B,Tl,A) buffer, Q is strided inside qkv (B,Tl,3A), dQ inside dqkv,
// as in the core: the lda/ldb/ldc and batch strides of every call are exercised.
//
// Bounds (relative to max(1, max|ref|), printed): 5e-5 for P, Y, dS, dV, dK, dQ (cuBLAS sums
// the fp32 products of ≤ Tl = 34 terms in another order than Eigen, the softmax's exp and its
// row sums over ≤ 2·Tl = 68 keys go by a warp butterfly: kernels_twin_test's bound for sums of
// ≤ 80 terms); the future chunk's P and dS exactly 0 on both.
//
// Shapes: B = 2, Tl = 34 (not a multiple of 32), T = 3·Tl = 102, A = 48, H = 4 (hs = 12 < 32).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/twin_test_util.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

using test::DevF;
using test::rel_err;
using test::rnd;
using test::Vec;
constexpr float kBound = 5e-5f;
constexpr int B = 2, Tl = 34, p = 3, r = 1, T = p * Tl, A = 48, H = 4, hs = A / H;
constexpr int64_t kRows = int64_t(B) * H * Tl;

using KernelsTwinRingSelfBlock = test::GpuTwin;

/// The buffers of one run (host or device pointers): inputs, then what the kernels write.
struct Bufs {
  const float *qkv, *k[2], *v[2], *dout;
  float *S, *y, *dP, *dv[2], *dk[2], *dqkv;
};

/// Block c of head (b, 0) in a (B,H,Tl,T) score tensor (head stride Tl·T).
int64_t block(int b, int c) { return int64_t(b) * H * Tl * T + int64_t(c) * Tl; }

/// The core's calls for rank r over chunks 0 and 1 (ring_self_attention.cc, in its order).
void run_core_sequence(KernelOps& ops, const Bufs& x) {
  const float scale = 1.0f / std::sqrt(float(hs));
  const int64_t hb = int64_t(Tl) * T;
  for (int c = 0; c <= r; ++c)
    for (int b = 0; b < B; ++b)  // S_c = (Q/√hs) K_cᵀ
      ops.gemm_strided_batched(false, true, Tl, Tl, hs, scale, x.qkv + b * Tl * 3 * A, 3 * A, hs,
                               x.k[c] + b * Tl * A, A, hs, 0.0f, x.S + block(b, c), T, hb, H);
  ops.causal_softmax_rows(x.S, kRows, Tl, T, r * Tl);
  for (int c = 0; c <= r; ++c)
    for (int b = 0; b < B; ++b)  // Y += P_c V_c
      ops.gemm_strided_batched(false, false, Tl, hs, Tl, 1.0f, x.S + block(b, c), T, hb,
                               x.v[c] + b * Tl * A, A, hs, 1.0f, x.y + b * Tl * A, A, hs, H);
  for (int c = 0; c <= r; ++c)
    for (int b = 0; b < B; ++b) {  // dP_c = dO V_cᵀ;  dV_c += P_cᵀ dO
      ops.gemm_strided_batched(false, true, Tl, Tl, hs, 1.0f, x.dout + b * Tl * A, A, hs,
                               x.v[c] + b * Tl * A, A, hs, 0.0f, x.dP + block(b, c), T, hb, H);
      ops.gemm_strided_batched(true, false, Tl, hs, Tl, 1.0f, x.S + block(b, c), T, hb,
                               x.dout + b * Tl * A, A, hs, 1.0f, x.dv[c] + b * Tl * A, A, hs, H);
    }
  ops.causal_softmax_rows_backward(x.dP, x.S, kRows, Tl, T, r * Tl, scale);
  for (int c = 0; c <= r; ++c)
    for (int b = 0; b < B; ++b) {  // dK_c += dS_cᵀ Q;  dQ += dS_c K_c
      ops.gemm_strided_batched(true, false, Tl, hs, Tl, 1.0f, x.dP + block(b, c), T, hb,
                               x.qkv + b * Tl * 3 * A, 3 * A, hs, 1.0f, x.dk[c] + b * Tl * A, A,
                               hs, H);
      ops.gemm_strided_batched(false, false, Tl, hs, Tl, 1.0f, x.dP + block(b, c), T, hb,
                               x.k[c] + b * Tl * A, A, hs, 1.0f, x.dqkv + b * Tl * 3 * A, 3 * A,
                               hs, H);
    }
}

/// The future chunk's columns [(r+1)·Tl, T) of every row of a (B,H,Tl,T) tensor.
Vec future_block(const Vec& s) {
  Vec out;
  for (int64_t k = 0; k < kRows; ++k)
    out.insert(out.end(), s.begin() + k * T + (r + 1) * Tl, s.begin() + (k + 1) * T);
  return out;
}

TEST_F(KernelsTwinRingSelfBlock, TheCoresCallSequenceMatchesTheCpu) {
  const Vec qkv = rnd(B * Tl * 3 * A, 61), k0 = rnd(B * Tl * A, 62), k1 = rnd(B * Tl * A, 63),
            v0 = rnd(B * Tl * A, 64), v1 = rnd(B * Tl * A, 65), dout = rnd(B * Tl * A, 66),
            acc0 = rnd(B * Tl * A, 67), acc1 = rnd(B * Tl * A, 68);  // accumulators not zero
  const Vec nan(size_t(kRows) * T, std::numeric_limits<float>::quiet_NaN());
  // CPU.
  Vec S = nan, dP = nan, y(B * Tl * A, 0.0f), dqkv(B * Tl * 3 * A, 0.0f);
  Vec dv[2] = {acc0, acc1}, dk[2] = {acc1, acc0};
  run_core_sequence(kernel_ops(Device::kCPU),
                    Bufs{qkv.data(), {k0.data(), k1.data()}, {v0.data(), v1.data()}, dout.data(),
                         S.data(), y.data(), dP.data(), {dv[0].data(), dv[1].data()},
                         {dk[0].data(), dk[1].data()}, dqkv.data()});
  // GPU, the same calls through the CUDA table.
  DevF gq(qkv), gk0(k0), gk1(k1), gv0(v0), gv1(v1), gdo(dout), gS(nan), gdP(nan), gy(y.size()),
      gdq(dqkv.size()), gdv0(acc0), gdv1(acc1), gdk0(acc1), gdk1(acc0);
  CUDA_CHECK(cudaMemset(gy.p, 0, sizeof(float) * gy.n));
  CUDA_CHECK(cudaMemset(gdq.p, 0, sizeof(float) * gdq.n));
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  ASSERT_EQ(gpu.unavailable_reason(), "");
  run_core_sequence(gpu, Bufs{gq.p, {gk0.p, gk1.p}, {gv0.p, gv1.p}, gdo.p, gS.p, gy.p, gdP.p,
                              {gdv0.p, gdv1.p}, {gdk0.p, gdk1.p}, gdq.p});

  const Vec gS_h = gS.get(), gdP_h = gdP.get();
  EXPECT_LE(rel_err(gS_h, S, "P (B,H,Tl,T)"), kBound);
  EXPECT_LE(rel_err(gy.get(), y, "Y = P V"), kBound);
  EXPECT_LE(rel_err(gdP_h, dP, "dS (B,H,Tl,T)"), kBound);
  EXPECT_LE(rel_err(gdv0.get(), dv[0], "dV_0 += P_0ᵀ dO"), kBound);
  EXPECT_LE(rel_err(gdv1.get(), dv[1], "dV_1 (diagonal)"), kBound);
  EXPECT_LE(rel_err(gdk0.get(), dk[0], "dK_0 += dS_0ᵀ Q"), kBound);
  EXPECT_LE(rel_err(gdk1.get(), dk[1], "dK_1 (diagonal)"), kBound);
  EXPECT_LE(rel_err(gdq.get(), dqkv, "dQ += dS K in dqkv"), kBound);
  const Vec zeros(future_block(S).size(), 0.0f);
  EXPECT_EQ(future_block(S), zeros) << "CPU: the future chunk's P";
  EXPECT_EQ(future_block(gS_h), zeros) << "GPU: the future chunk's P (was NaN)";
  EXPECT_EQ(future_block(gdP_h), zeros) << "GPU: the future chunk's dS (was NaN)";
}

}  // namespace
}  // namespace llmp
