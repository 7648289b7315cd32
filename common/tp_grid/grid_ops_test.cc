// The group-split LayerNorm and cross-entropy (grid_layernorm.h, grid_cross_entropy.h) against
// the dense kernels (kernels/cpu) at 1, 2 and 4 ranks. Every rank builds the same whole rows from one
// seed, keeps its column (or vocabulary) block, runs the split op, and compares its block of the
// result with the same block of the dense result; the whole-row statistics (mean, rstd, loss) must
// be the same on every rank. A rank that skipped a reduction (or reduced the wrong buffer) gets
// its own block's statistics, which differ from the row's: the comparisons fail.
// Call counts (counted on a one-rank group too, with 0 bytes) and bytes are asserted against the header's numbers (2 calls of N floats forward,
// 1 of 2N backward; 2 calls of N and 2N floats for the cross-entropy).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/tp_grid/grid_cross_entropy.h"
#include "common/testing/max_or_nan.h"
#include "common/tp_grid/grid_layernorm.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/grad_check.h"
#include "kernels/cpu/layernorm.h"

namespace llmp {
namespace {

constexpr int kN = 6, kC = 16, kV = 32;

double max_diff(const float* a, const float* b, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; ++i) d = testing::max_or_nan(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

// Columns [c0, c0 + Cl) of the (N, C) row-major matrix x.
std::vector<float> cols(const std::vector<float>& x, int N, int C, int c0, int Cl) {
  std::vector<float> out(static_cast<size_t>(N) * Cl);
  for (int n = 0; n < N; ++n)
    std::copy(x.begin() + n * C + c0, x.begin() + n * C + c0 + Cl, out.begin() + n * Cl);
  return out;
}

int64_t calls(const ProcessGroup& g) {
  int64_t c = 0;
  for (const auto& [op, k] : g.stats().calls) c += op == "all_reduce" ? k : 0;
  return c;
}

TEST(GridLayerNorm, MatchesTheDenseKernelBlockByBlock) {
  auto g = ProcessGroup::world();
  const int n = g->size(), r = g->rank();
  if (kC % n != 0) GTEST_SKIP() << "C=" << kC << " is not divisible by " << n << " ranks";
  const int Cl = kC / n, c0 = r * Cl;
  std::vector<float> x(kN * kC), w(kC), b(kC), dy(kN * kC);
  testing::fill_uniform(x.data(), x.size(), 1, -2.0f, 3.0f);  // a non-zero mean per row
  testing::fill_uniform(w.data(), w.size(), 2, 0.5f, 1.5f);
  testing::fill_uniform(b.data(), b.size(), 3, -0.5f, 0.5f);
  testing::fill_uniform(dy.data(), dy.size(), 4, -1.0f, 1.0f);
  // Dense reference.
  std::vector<float> y(kN * kC), mean(kN), rstd(kN), dx(kN * kC, 0.5f), dw(kC, 0), db(kC, 0);
  cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kN, kC);
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), kN, kC);
  // Split: this rank's columns.
  const auto xl = cols(x, kN, kC, c0, Cl), dyl = cols(dy, kN, kC, c0, Cl);
  std::vector<float> yl(kN * Cl), ml(kN), rl(kN), dxl(kN * Cl, 0.5f), dwl(Cl, 0), dbl(Cl, 0);
  const int64_t calls0 = calls(*g);
  const double bytes0 = g->stats().total_bytes();
  grid_layernorm_forward(*g, yl.data(), ml.data(), rl.data(), xl.data(), w.data() + c0,
                         b.data() + c0, kN, Cl, kC);
  EXPECT_EQ(calls(*g) - calls0, 2) << "forward: two all_reduces of N floats";
  EXPECT_DOUBLE_EQ(g->stats().total_bytes() - bytes0, 2 * 2.0 * (n - 1) / n * 4 * kN);
  grid_layernorm_backward(*g, dxl.data(), dwl.data(), dbl.data(), dyl.data(), xl.data(),
                          w.data() + c0, ml.data(), rl.data(), kN, Cl, kC);
  EXPECT_EQ(calls(*g) - calls0, 3) << "backward: one all_reduce of 2N floats";
  const double dmean = max_diff(ml.data(), mean.data(), kN), drstd = max_diff(rl.data(), rstd.data(), kN);
  const double dyv = max_diff(yl.data(), cols(y, kN, kC, c0, Cl).data(), kN * Cl);
  const double ddx = max_diff(dxl.data(), cols(dx, kN, kC, c0, Cl).data(), kN * Cl);
  const double ddw = max_diff(dwl.data(), dw.data() + c0, Cl), ddb = max_diff(dbl.data(), db.data() + c0, Cl);
  std::printf("rank %d/%d: max |diff| mean %.2e rstd %.2e y %.2e dx %.2e dw %.2e db %.2e\n", r, n,
              dmean, drstd, dyv, ddx, ddw, ddb);
  EXPECT_LT(dmean, 1e-5);
  EXPECT_LT(drstd, 1e-5);
  EXPECT_LT(dyv, 1e-5);
  EXPECT_LT(ddx, 1e-5);  // also checks the accumulation into dx's 0.5
  EXPECT_LT(ddw, 1e-5);
  EXPECT_LT(ddb, 1e-5);
}

TEST(GridLayerNorm, ColumnsThatDoNotMakeCThrow) {
  auto g = ProcessGroup::world();
  std::vector<float> x(kC + 1), y(kC + 1), w(kC + 1), b(kC + 1), m(1), s(1);
  EXPECT_THROW(grid_layernorm_forward(*g, y.data(), m.data(), s.data(), x.data(), w.data(),
                                      b.data(), 1, kC + 1, kC),
               std::invalid_argument);
}

TEST(GridCrossEntropy, MatchesTheDenseKernelBlockByBlock) {
  auto g = ProcessGroup::world();
  const int n = g->size(), r = g->rank();
  if (kV % n != 0) GTEST_SKIP() << "V=" << kV << " is not divisible by " << n << " ranks";
  const int Vr = kV / n, v0 = r * Vr;
  std::vector<float> z(kN * kV);
  testing::fill_uniform(z.data(), z.size(), 5, -4.0f, 4.0f);
  std::vector<int32_t> y(kN);
  for (int i = 0; i < kN; ++i) y[i] = (7 * i + 3) % kV;  // targets in every rank's block
  const float dloss = 0.25f;
  // Dense reference: the same three steps on one rank.
  std::vector<float> zd = z, m(kN), sums(2 * kN);
  cpu::cross_entropy_row_max(m.data(), zd.data(), kN, kV);
  cpu::cross_entropy_exp_sums(sums.data(), zd.data(), y.data(), 0, kN, kV, m.data());
  const double loss = cpu::cross_entropy_loss(zd.data(), y.data(), 0, kN, kV, m.data(),
                                              sums.data(), dloss, true, DType::kF32);
  std::vector<float> zl = cols(z, kN, kV, v0, Vr);
  const int64_t calls0 = calls(*g);
  const double got = grid_cross_entropy(*g, zl.data(), y.data(), v0, kN, Vr, dloss, true);
  EXPECT_EQ(calls(*g) - calls0, 2);  // counted on one rank too (0 bytes)
  const double dz = max_diff(zl.data(), cols(zd, kN, kV, v0, Vr).data(), kN * Vr);
  std::printf("rank %d/%d: loss %.8f (dense %.8f), max |dlogits diff| %.2e\n", r, n, got, loss, dz);
  EXPECT_NEAR(got, loss, 1e-5 * kN);
  EXPECT_LT(dz, 1e-6);
}

}  // namespace
}  // namespace llmp
