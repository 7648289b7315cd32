// Lab summa: the tests. They reach the code only through summa.h (and the given summa_grid.h), so
// this one file checks both the reference (reference_test, in CI) and your starter.cc
// (student_test: bazel test //labs/summa:student_test).
//
// Every rank draws the whole X (M, K), W (K, N) and dY (M, N) from one seed, computes Y = X·W,
// dX = dY·Wᵀ and dW = Xᵀ·dY in double with plain loops (no kernel shared with the code under
// test), cuts out its own blocks (i, j) and runs summa_forward / summa_backward. What is checked:
//  - Y_ij, dX_ij and dW_ij equal the blocks of the dense results on every rank, within kRelTol of
//    the matrix's largest element (the float kernels sum at most K or M = 24 products of O(1)
//    terms: rounding ~1e-7 of that scale, printed by rank 0; a wrong block is off by O(1));
//  - dW accumulates: two backward calls give twice the block;
//  - traffic, per group, against SUMMA's closed forms (summa.h): forward q broadcasts on the row
//    group (4MK/q bytes) and q on the column group (4KN/q); backward q broadcasts + q reduces on
//    each (8MK/q, 8KN/q); no other call;
//  - blocks that are not square, M ≠ K ≠ N (block sides 3, 5, 7: any operand transposed or taken
//    from the wrong matrix has the wrong shape or the wrong values);
//  - a grid built over a group whose ranks are the world's in reverse order, so code that uses
//    world ranks instead of the grid's fails.
//
// Glossary: P = q² ranks, (i, j) this rank's grid place, M, K, N the matrices' sides, m = M/q,
// kb = K/q, n = N/q the blocks'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "labs/summa/summa.h"
#include "labs/summa/summa_grid.h"

namespace llmp {
namespace {

constexpr double kRelTol = 1e-5;

// X·W and its gradients, in double, from float inputs drawn with one seed.
struct Dense {
  int M, K, N;
  std::vector<double> X, W, dY, Y, dX, dW;  // row-major (M,K) (K,N) (M,N) (M,N) (M,K) (K,N)
  Dense(int m, int k, int n, unsigned seed) : M(m), K(k), N(n) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto draw = [&](int count) {
      std::vector<double> v(count);
      for (double& e : v) e = u(gen);
      return v;
    };
    X = draw(M * K), W = draw(K * N), dY = draw(M * N);
    Y.assign(M * N, 0.0), dX.assign(M * K, 0.0), dW.assign(K * N, 0.0);
    for (int r = 0; r < M; ++r)
      for (int k = 0; k < K; ++k)
        for (int c = 0; c < N; ++c) {
          Y[r * N + c] += X[r * K + k] * W[k * N + c];
          dX[r * K + k] += dY[r * N + c] * W[k * N + c];
          dW[k * N + c] += X[r * K + k] * dY[r * N + c];
        }
  }
};

// Block (bi, bj) of a row-major (rows, cols) matrix cut into q×q blocks.
std::vector<double> block_of(const std::vector<double>& a, int rows, int cols, int q, int bi,
                             int bj) {
  const int br = rows / q, bc = cols / q;
  std::vector<double> out;
  for (int r = 0; r < br; ++r)
    for (int c = 0; c < bc; ++c) out.push_back(a[(bi * br + r) * cols + bj * bc + c]);
  return out;
}

Tensor tensor(int rows, int cols, const std::vector<double>& v) {
  Tensor t = Tensor::empty({rows, cols}, DType::kF32, MemCategory::kParameters);
  for (int64_t e = 0; e < t.numel(); ++e) t.f32()[e] = static_cast<float>(v[e]);
  return t;
}

// "" when got = k·want within kRelTol of the largest |k·want| of the whole matrix, else a report.
double g_worst = 0;
std::string off(const char* what, const Tensor& got, int rows, int cols,
                const std::vector<double>& want, double scale_of_matrix, double k = 1.0) {
  if (got.shape() != std::vector<int64_t>({rows, cols}))
    return std::string(what) + ": shape " + shape_str(got.shape()) + ", want " +
           shape_str({rows, cols});
  const double scale = std::fabs(k) * scale_of_matrix;
  double worst = 0;
  int64_t at = 0;
  for (int64_t e = 0; e < got.numel(); ++e) {
    const double d = std::fabs(got.f32()[e] - k * want[e]);
    if (!std::isnan(worst) && !(d <= worst)) worst = d, at = e;
  }
  if (worst <= kRelTol * scale) {
    g_worst = std::max(g_worst, worst / scale);
    return "";
  }
  std::ostringstream o;
  o << what << ": max |got - want| = " << worst << " > " << kRelTol << " × " << scale
    << " (largest |want| of the whole matrix), at element " << at << ": got " << got.f32()[at]
    << ", want " << k * want[at];
  return o.str();
}
double largest(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s = std::max(s, std::fabs(e));
  return s;
}

#define EXPECT_CLOSE(report)                         \
  if (const std::string e_ = (report); e_.empty()) { \
  } else                                             \
    ADD_FAILURE() << e_ << "\n  "

int64_t all_calls(const ProcessGroup& g) {
  int64_t n = 0;
  for (const auto& kv : g.stats().calls) n += kv.second;
  return n;
}

// One problem on one grid: this rank's blocks, run forward (and backward) and compare.
struct Case {
  Dense d;
  SummaGrid g;
  int m, kb, n;
  Tensor x, w, dy, dw;
  Case(int M, int K, int N, unsigned seed, ProcessGroup& group)
      : d(M, K, N, seed), g(make_summa_grid(group)) {
    const int q = g.q;
    m = M / q, kb = K / q, n = N / q;
    x = tensor(m, kb, block_of(d.X, M, K, q, g.i, g.j));
    w = tensor(kb, n, block_of(d.W, K, N, q, g.i, g.j));
    dy = tensor(m, n, block_of(d.dY, M, N, q, g.i, g.j));
    dw = Tensor::zeros({kb, n}, DType::kF32, MemCategory::kGradients);
  }
  std::string where() const {
    return "q = " + std::to_string(g.q) + ", rank (" + std::to_string(g.i) + ", " +
           std::to_string(g.j) + "), (M, K, N) = (" + std::to_string(d.M) + ", " +
           std::to_string(d.K) + ", " + std::to_string(d.N) + ")";
  }
  void expect_forward() {
    Tensor y = summa_forward(x, w, g);
    EXPECT_CLOSE(off("Y_ij", y, m, n, block_of(d.Y, d.M, d.N, g.q, g.i, g.j), largest(d.Y)))
        << where() << ": want block (i, j) of X·W";
  }
  void expect_backward(int times = 1) {
    Tensor dx;
    for (int t = 0; t < times; ++t) dx = summa_backward(dy, x, w, dw, g);
    EXPECT_CLOSE(off("dX_ij", dx, m, kb, block_of(d.dX, d.M, d.K, g.q, g.i, g.j), largest(d.dX)))
        << where() << ": want block (i, j) of dY·Wᵀ";
    EXPECT_CLOSE(off("dW_ij", dw, kb, n, block_of(d.dW, d.K, d.N, g.q, g.i, g.j), largest(d.dW),
                     times))
        << where() << ": want " << times << " × block (i, j) of Xᵀ·dY (+=, not =)";
  }
};

class Summa : public ::testing::Test {
 protected:
  void SetUp() override { world = ProcessGroup::world(); }
  void TearDown() override {
    if (world->rank() == 0 && g_worst > 0)
      std::printf("P = %d: largest difference from the dense product, relative to the matrix's "
                  "largest element: %.2g (bound %g)\n",
                  world->size(), g_worst, kRelTol);
    g_worst = 0;
  }
  int q() const { return static_cast<int>(std::lround(std::sqrt(world->size()))); }
  std::shared_ptr<ProcessGroup> world;
};

TEST_F(Summa, GridPlacesGroupRankGAtRowGOverQColumnGModQ) {
  const SummaGrid g = make_summa_grid(*world);
  const int r = world->rank(), Q = q();
  EXPECT_EQ(g.q, Q);
  EXPECT_EQ(g.i, r / Q);
  EXPECT_EQ(g.j, r % Q);
  EXPECT_EQ(g.row->rank(), g.j) << "a rank's place in its row group is its column";
  EXPECT_EQ(g.col->rank(), g.i) << "a rank's place in its column group is its row";
  std::vector<int> row, col;
  for (int c = 0; c < Q; ++c) row.push_back(g.i * Q + c), col.push_back(c * Q + g.j);
  EXPECT_EQ(g.row->world_ranks(), row);
  EXPECT_EQ(g.col->world_ranks(), col);
}

TEST_F(Summa, ForwardMatchesTheDenseProduct) {
  Case c(6 * q(), 6 * q(), 6 * q(), 1997, *world);
  c.expect_forward();
}

TEST_F(Summa, BackwardGivesTheBlocksOfDxAndDw) {
  Case c(6 * q(), 6 * q(), 6 * q(), 1997, *world);
  summa_forward(c.x, c.w, c.g);
  c.expect_backward();
}

TEST_F(Summa, WeightGradientAccumulatesAcrossBackwardCalls) {
  Case c(6 * q(), 6 * q(), 6 * q(), 11, *world);
  c.expect_backward(/*times=*/2);
}

TEST_F(Summa, NonSquareBlocks) {
  Case c(3 * q(), 5 * q(), 7 * q(), 2021, *world);  // blocks (3, 5) @ (5, 7): M ≠ K ≠ N
  c.expect_forward();
  c.expect_backward();
}

// SUMMA's traffic, per group and per pass, with the non-square blocks (so that a block sent along
// the wrong group has the wrong size): forward 4MK/q on the row group, 4KN/q on the column group,
// q broadcasts each; backward twice that, q broadcasts and q reduces on each.
TEST_F(Summa, BytesAndCallsPerGroupAreSummasClosedForms) {
  Case c(3 * q(), 5 * q(), 7 * q(), 5, *world);
  const int Q = c.g.q;
  const double live = Q > 1 ? 1.0 : 0.0;  // a group of one rank counts its calls with 0 bytes
  const double MK = live * 4.0 * c.d.M * c.d.K / Q, KN = live * 4.0 * c.d.K * c.d.N / Q;
  const char* pass[] = {"forward", "backward"};
  for (int p = 0; p < 2; ++p) {
    c.g.row->reset_stats(), c.g.col->reset_stats();
    if (p == 0) summa_forward(c.x, c.w, c.g);
    if (p == 1) summa_backward(c.dy, c.x, c.w, c.dw, c.g);
    const ProcessGroup &row = *c.g.row, &col = *c.g.col;
    SCOPED_TRACE(std::string(pass[p]) + ", " + c.where() + "; row group:" +
                 row.stats().calls_str() + "; column group:" + col.stats().calls_str());
    EXPECT_EQ(row.stats().calls_of("broadcast"), Q)
        << "one broadcast of X_ik per step along the row";
    EXPECT_EQ(col.stats().calls_of("broadcast"), Q)
        << "one broadcast of W_kj per step down the column";
    EXPECT_EQ(row.stats().calls_of("reduce"), p == 1 ? Q : 0)
        << "backward: one reduce of dX per step";
    EXPECT_EQ(col.stats().calls_of("reduce"), p == 1 ? Q : 0)
        << "backward: one reduce of dW per step";
    EXPECT_EQ(all_calls(row), (p + 1) * Q) << "row group: these broadcasts and reduces only";
    EXPECT_EQ(all_calls(col), (p + 1) * Q) << "column group: these broadcasts and reduces only";
    EXPECT_EQ(row.stats().bytes_of("broadcast"), MK) << "q blocks (m, kb): 4MK/q";
    EXPECT_EQ(col.stats().bytes_of("broadcast"), KN) << "q blocks (kb, n): 4KN/q";
    EXPECT_EQ(row.stats().total_bytes(), (p + 1) * MK) << "want 4MK/q forward, 8MK/q backward";
    EXPECT_EQ(col.stats().total_bytes(), (p + 1) * KN) << "want 4KN/q forward, 8KN/q backward";
  }
  EXPECT_EQ(world->stats().total_bytes(), 0.0) << "the world group was used, not the grid's";
}

// The grid over a group whose rank g is world rank P-1-g: the blocks follow the GROUP's ranks.
TEST_F(Summa, GridOverAGroupWithReversedRanks) {
  auto rev = world->split(0, -world->rank());
  Case c(3 * q(), 5 * q(), 7 * q(), 77, *rev);
  c.expect_forward();
  c.expect_backward();
}

}  // namespace
}  // namespace llmp
