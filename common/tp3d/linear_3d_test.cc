// linear3d_forward / linear3d_backward against the dense products on seeded inputs, as an A→B
// linear, a B→A linear and the transposed (tied-head) form, at P = 1 and 8 (q = 1, 2); the bytes
// each group sent against linear_3d.h's per-collective forms, and the calls (3 forward, 4
// backward).
//
// Shapes: M = 4q² rows, K = 8, N = 12 (K/q² and N/q² whole at q = 2). Dense in double.
// Glossary: (i,j,l) this rank's coordinates; (u, v) = (j, l) for A→B, (l, j) for B→A.
#include "common/tp3d/linear_3d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "common/tp3d/cube.h"

namespace llmp {
namespace {

ProcessGroup& world() {
  static std::shared_ptr<ProcessGroup> w = ProcessGroup::world();
  return *w;
}

double seeded(int which, int64_t r, int64_t c) { return std::sin(0.37 * r + 0.91 * c + which); }

struct Dense {  // row-major (rows, cols) in double
  int64_t rows, cols;
  std::vector<double> v;
  double at(int64_t r, int64_t c) const { return v[r * cols + c]; }
};

Dense make(int which, int64_t rows, int64_t cols) {
  Dense d{rows, cols, std::vector<double>(rows * cols)};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) d.v[r * cols + c] = seeded(which, r, c);
  return d;
}

// a (n,k) @ b (k,p), with either side transposed first.
Dense matmul(const Dense& a, bool ta, const Dense& b, bool tb) {
  const int64_t n = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols, p = tb ? b.rows : b.cols;
  Dense y{n, p, std::vector<double>(n * p, 0.0)};
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < p; ++c)
      for (int64_t s = 0; s < k; ++s)
        y.v[r * p + c] += (ta ? a.at(s, r) : a.at(r, s)) * (tb ? b.at(c, s) : b.at(s, c));
  return y;
}

Dense transpose(const Dense& d) {
  Dense t{d.cols, d.rows, std::vector<double>(d.v.size())};
  for (int64_t r = 0; r < d.rows; ++r)
    for (int64_t c = 0; c < d.cols; ++c) t.v[c * d.rows + r] = d.at(r, c);
  return t;
}

// The (rows [r0, r0+nr) × cols [c0, c0+nc)) block of d as an f32 tensor.
Tensor block(const Dense& d, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  Tensor t = Tensor::empty({nr, nc});
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t c = 0; c < nc; ++c) t.f32()[r * nc + c] = static_cast<float>(d.at(r0 + r, c0 + c));
  return t;
}

void expect_near(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  for (int64_t k = 0; k < got.numel(); ++k)
    ASSERT_NEAR(got.f32()[k], want.f32()[k], 1e-5) << what << " element " << k;
}

int64_t calls(const ProcessGroup& g) {
  int64_t n = 0;
  for (const auto& kv : g.stats().calls) n += kv.second;
  return n;
}

// One linear on the cube: a_to_b picks (u, v) = (j, l), else (l, j).
void check_linear(bool a_to_b, bool transposed) {
  Cube cube(world());
  const int q = cube.q, i = cube.i, u = a_to_b ? cube.j : cube.l, v = a_to_b ? cube.l : cube.j;
  const int64_t M = 4 * q * q, m = M / (q * q), K = 8, N = 12, Kq = K / q, Nq = N / q;
  const Dense X = make(1, M, K), W = make(2, K, N), dY = make(3, M, N);
  const Linear3dGroups g = a_to_b ? Linear3dGroups{cube.j_axis.get(), cube.i_axis.get(), cube.l_axis.get()}
                                  : Linear3dGroups{cube.l_axis.get(), cube.i_axis.get(), cube.j_axis.get()};
  const Tensor x = block(X, (i * q + u) * m, m, v * Kq, Kq);
  // Weight piece: rows piece i of row block v, column block u (or, transposed, of Wᵀ).
  const Dense Wt = transpose(W);  // (N,K): the tied head's storage
  const Tensor w = transposed ? block(Wt, u * Nq + i * (N / (q * q)), N / (q * q), v * Kq, Kq)
                              : block(W, v * Kq + i * (K / (q * q)), K / (q * q), u * Nq, Nq);
  const double b0[3] = {g.gx->stats().total_bytes(), g.gw->stats().total_bytes(),
                        g.gy->stats().total_bytes()};
  const int64_t c0 = calls(*g.gx) + calls(*g.gw) + calls(*g.gy);
  Tensor xg;
  const Tensor y = linear3d_forward(g, x, w, K, N, transposed, &xg);
  // Forward: y = (X W) rows sub-block i·q+v, column block u.
  expect_near(y, block(matmul(X, false, W, false), (i * q + v) * m, m, u * Nq, Nq), "y");
  EXPECT_EQ(calls(*g.gx) + calls(*g.gw) + calls(*g.gy) - c0, 3);
  const double f = (q - 1.0) / q, q2 = double(q) * q;
  EXPECT_EQ(g.gx->stats().total_bytes() - b0[0], f * 4 * M * K / q2);
  EXPECT_EQ(g.gw->stats().total_bytes() - b0[1], f * 4 * K * N / q2);
  EXPECT_EQ(g.gy->stats().total_bytes() - b0[2], f * 4 * M * N / q2);

  const Tensor dy = block(dY, (i * q + v) * m, m, u * Nq, Nq);
  Tensor dw = Tensor::empty({w.numel()});
  dw.fill(1.0f);  // accumulated onto
  const Tensor dx = linear3d_backward(g, dy, xg, w, dw, K, N, transposed);
  expect_near(dx, block(matmul(dY, false, W, true), (i * q + u) * m, m, v * Kq, Kq), "dx");
  Tensor want_dw = transposed
                       ? block(matmul(dY, true, X, false), u * Nq + i * (N / (q * q)), N / (q * q), v * Kq, Kq)
                       : block(matmul(X, true, dY, false), v * Kq + i * (K / (q * q)), K / (q * q), u * Nq, Nq);
  for (int64_t k = 0; k < want_dw.numel(); ++k) want_dw.f32()[k] += 1.0f;
  expect_near(dw, want_dw, "dW piece");
  EXPECT_EQ(calls(*g.gx) + calls(*g.gw) + calls(*g.gy) - c0, 7);
  EXPECT_EQ(g.gx->stats().total_bytes() - b0[0], 2 * f * 4 * M * K / q2);
  EXPECT_EQ(g.gw->stats().total_bytes() - b0[1], 3 * f * 4 * K * N / q2);
  EXPECT_EQ(g.gy->stats().total_bytes() - b0[2], 2 * f * 4 * M * N / q2);
}

TEST(Linear3d, AToBMatchesTheDenseProduct) { check_linear(true, false); }
TEST(Linear3d, BToAMatchesTheDenseProduct) { check_linear(false, false); }
TEST(Linear3d, TransposedWeightMatchesTheDenseProduct) { check_linear(true, true); }

TEST(Cube, GroupsFollowTheWorkedMapping) {
  Cube cube(world());
  const int q = cube.q, r = world().rank();
  EXPECT_EQ(r, (cube.i * q + cube.j) * q + cube.l);
  // Each group's world ranks, from the mapping in cube.h.
  std::vector<int> want_i, want_j, want_l, want_pl, want_pj;
  for (int a = 0; a < q; ++a) {
    want_i.push_back((a * q + cube.j) * q + cube.l);
    want_j.push_back((cube.i * q + a) * q + cube.l);
    want_l.push_back((cube.i * q + cube.j) * q + a);
    for (int b = 0; b < q; ++b) {
      want_pl.push_back((a * q + b) * q + cube.l);
      want_pj.push_back((a * q + cube.j) * q + b);
    }
  }
  EXPECT_EQ(cube.i_axis->world_ranks(), want_i);
  EXPECT_EQ(cube.j_axis->world_ranks(), want_j);
  EXPECT_EQ(cube.l_axis->world_ranks(), want_l);
  EXPECT_EQ(cube.plane_l->world_ranks(), want_pl);
  EXPECT_EQ(cube.plane_j->world_ranks(), want_pj);
}

}  // namespace
}  // namespace llmp
