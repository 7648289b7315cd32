// SUMMA's three products (summa.h) against dense products, and the grid's groups against the
// worked mapping of grid_2p5d.h. Run at P = 1 (q = 1), 4 (q = 2) and 8 (q = 2, d = 2: each depth
// layer multiplies on its own). Every rank builds the same whole matrices from fixed seeds,
// keeps block (i,j) of each operand and compares its block of the result with the same block of
// the dense product. A wrong root, a missing reduce or a transposed block index puts another
// block's numbers there and the comparison fails. Bytes and calls per group against summa.h:
// AB q broadcasts on each group of 4·N·Kl (row) and 4·Kl·Ml (column); ABT q column broadcasts
// and q row reduces; ATB q row broadcasts and q column reduces. And a linear layer's forward:
// the product plus kernels/cpu/tp_grid.h's bias_add of the rank's column block of the bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/tp2d/grid_2p5d.h"
#include "common/testing/max_or_nan.h"
#include "common/tp2d/summa.h"
#include "kernels/cpu/grad_check.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/tp_grid.h"

namespace llmp {
namespace {

constexpr int kN = 3, kK = 8, kM = 12;  // rows per block; inner and outer widths (whole)

// Block (bi, bj) of the (R, Cw) row-major matrix x, blocks of (rows, cols).
std::vector<float> block(const std::vector<float>& x, int Cw, int bi, int bj, int rows, int cols) {
  std::vector<float> out(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[r * cols + c] = x[(bi * rows + r) * Cw + bj * cols + c];
  return out;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t e = 0; e < a.size(); ++e) d = testing::max_or_nan(d, std::fabs(double(a[e]) - double(b[e])));
  return d;
}

int depth_for(int P) { return P == 8 ? 2 : 1; }

TEST(Summa, ThreeProductsMatchDenseBlockByBlock) {
  auto world = ProcessGroup::world();
  Grid2p5d g(*world, depth_for(world->size()));
  const int q = g.q(), i = g.i(), j = g.j(), R = q * kN, Kl = kK / q, Ml = kM / q;
  std::vector<float> X(R * kK), W(kK * kM), dY(R * kM);
  testing::fill_uniform(X.data(), X.size(), 11 + g.h(), -1, 1);  // each depth layer its own rows
  testing::fill_uniform(W.data(), W.size(), 12, -1, 1);
  testing::fill_uniform(dY.data(), dY.size(), 13 + g.h(), -1, 1);
  std::vector<float> Y(R * kM), dX(R * kK), dW(kK * kM, 0.5f);
  cpu::matmul_forward(Y.data(), X.data(), W.data(), nullptr, R, kK, kM);
  cpu::matmul_backward(dX.data(), dW.data(), nullptr, dY.data(), X.data(), W.data(), R, kK, kM);
  const auto Xb = block(X, kK, i, j, kN, Kl), Wb = block(W, kM, i, j, Kl, Ml),
             dYb = block(dY, kM, i, j, kN, Ml);
  std::vector<float> Yb(kN * Ml), dXb(kN * Kl), dWb(Kl * Ml, 0.5f);
  summa_ab(g.row(), g.col(), Yb.data(), Xb.data(), Wb.data(), kN, Kl, Ml);
  EXPECT_EQ(g.row().stats().calls_of("broadcast"), q);
  EXPECT_EQ(g.col().stats().calls_of("broadcast"), q);
  EXPECT_DOUBLE_EQ(g.row().stats().total_bytes(), q > 1 ? q * 4.0 * kN * Kl : 0);
  EXPECT_DOUBLE_EQ(g.col().stats().total_bytes(), q > 1 ? q * 4.0 * Kl * Ml : 0);
  summa_abt(g.row(), g.col(), dXb.data(), dYb.data(), Wb.data(), kN, Ml, Kl);
  EXPECT_EQ(g.row().stats().calls_of("reduce"), q);
  EXPECT_EQ(g.col().stats().calls_of("broadcast"), 2 * q);
  summa_atb(g.row(), g.col(), dWb.data(), Xb.data(), dYb.data(), kN, Kl, Ml);
  EXPECT_EQ(g.row().stats().calls_of("broadcast"), 2 * q);
  EXPECT_EQ(g.col().stats().calls_of("reduce"), q);
  // A linear layer's forward + backward: 12·N·K on the row group, 12·K·M/q on the column group.
  EXPECT_DOUBLE_EQ(g.row().stats().total_bytes(), q > 1 ? 12.0 * kN * kK : 0);
  EXPECT_DOUBLE_EQ(g.col().stats().total_bytes(), q > 1 ? 12.0 * kK * kM / q : 0);
  // dW summed over this depth layer's rows only: the dense reference is this layer's too.
  const double dy = max_diff(Yb, block(Y, kM, i, j, kN, Ml)),
               dx = max_diff(dXb, block(dX, kK, i, j, kN, Kl)),
               dw = max_diff(dWb, block(dW, kM, i, j, Kl, Ml));
  std::printf("rank (%d,%d,%d) of q=%d: max |diff| Y %.2e dX %.2e dW %.2e\n", g.h(), i, j, q, dy,
              dx, dw);
  EXPECT_LT(dy, 1e-5);
  EXPECT_LT(dx, 1e-5);
  EXPECT_LT(dw, 1e-5);
}

// A linear layer's forward as the 2D walk runs it (common/tp2d/gpt_2p5d.cc): SUMMA's product,
// then bias_add of this rank's column block of the bias, against the dense matmul_forward with
// its bias. A bias indexed by the row instead of the column (or from another column block) puts
// other numbers into every row: the comparison fails.
TEST(Summa, LinearWithBiasMatchesDenseBlockByBlock) {
  auto world = ProcessGroup::world();
  Grid2p5d g(*world, depth_for(world->size()));
  const int q = g.q(), i = g.i(), j = g.j(), R = q * kN, Kl = kK / q, Ml = kM / q;
  std::vector<float> X(R * kK), W(kK * kM), b(kM), Y(R * kM);
  testing::fill_uniform(X.data(), X.size(), 21 + g.h(), -1, 1);
  testing::fill_uniform(W.data(), W.size(), 22, -1, 1);
  testing::fill_uniform(b.data(), b.size(), 23, -1, 1);
  cpu::matmul_forward(Y.data(), X.data(), W.data(), b.data(), R, kK, kM);
  const auto Xb = block(X, kK, i, j, kN, Kl), Wb = block(W, kM, i, j, Kl, Ml);
  std::vector<float> Yb(kN * Ml);
  summa_ab(g.row(), g.col(), Yb.data(), Xb.data(), Wb.data(), kN, Kl, Ml);
  cpu::bias_add(Yb.data(), b.data() + j * Ml, kN, Ml);  // (N, Ml) += b_j (Ml) on every row
  const double dy = max_diff(Yb, block(Y, kM, i, j, kN, Ml));
  std::printf("rank (%d,%d,%d) of q=%d: linear with bias, max |diff| Y %.2e\n", g.h(), i, j, q, dy);
  EXPECT_LT(dy, 1e-5);
}

TEST(Grid2p5d, GroupsFollowTheWorkedMapping) {
  auto world = ProcessGroup::world();
  const int P = world->size(), w = world->rank();
  Grid2p5d g(*world, depth_for(P));
  EXPECT_EQ((g.h() * g.q() + g.i()) * g.q() + g.j(), w);
  if (P == 4) {  // rows {0,1} {2,3}; columns {0,2} {1,3}; depth {w}
    const std::vector<std::vector<int>> rows = {{0, 1}, {0, 1}, {2, 3}, {2, 3}},
                                        cols = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
    EXPECT_EQ(g.row().world_ranks(), rows[w]);
    EXPECT_EQ(g.col().world_ranks(), cols[w]);
    EXPECT_EQ(g.depth().world_ranks(), std::vector<int>{w});
  } else if (P == 8) {  // rows {0,1} {2,3} {4,5} {6,7}; columns {0,2} {1,3} {4,6} {5,7}
    const int row0 = w / 2 * 2, col0 = w / 4 * 4 + w % 2;
    EXPECT_EQ(g.row().world_ranks(), (std::vector<int>{row0, row0 + 1}));
    EXPECT_EQ(g.col().world_ranks(), (std::vector<int>{col0, col0 + 2}));
    EXPECT_EQ(g.depth().world_ranks(), (std::vector<int>{w % 4, w % 4 + 4}));  // {0,4} {1,5} ...
  } else {
    EXPECT_EQ(g.q(), 1);
    EXPECT_EQ(g.row().size(), 1);
  }
}

TEST(Grid2p5d, RefusesAWorldThatIsNotDTimesASquare) {
  auto world = ProcessGroup::world();
  if (world->size() != 8) GTEST_SKIP() << "8 ranks: 8 is not q² (d = 1) nor q²·3";
  EXPECT_THROW(Grid2p5d(*world, 1), std::invalid_argument);
  EXPECT_THROW(Grid2p5d(*world, 3), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
