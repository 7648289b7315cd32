// Finite-difference gradient checks of every CPU kernel's backward (matmul, layernorm, gelu,
// attention, cross-entropy, embedding), plus their overwrite/accumulate contracts.
//
// Each forward f is turned into a scalar L = Σ f(p) ⊙ R with fixed random R, so the backward is
// run with dy = R and its result compared with central differences of L (grad_check.h). The
// largest relative error of each gradient is printed; a dropped term in any backward gives O(1).
//
// Glossary: N rows, C/OC channels, B batch, T sequence, H heads, V vocabulary, R random cotangent.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/grad_check.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"

namespace llmp {
namespace cpu {
namespace {
using testing::check_grad;
using testing::fill_uniform;
using testing::print_result;
using Vec = std::vector<float>;

constexpr double kTol = 1e-2;    // f32 forward, ε = 1e-2 (L(p±ε) differs by ~1e-2·|g|)
constexpr double kFloor = 1e-2;  // gradients are O(0.1..1) here
constexpr float kEps = 1e-2f;

Vec rand_vec(size_t n, uint64_t seed, float lo = -1, float hi = 1) {
  Vec v(n);
  fill_uniform(v.data(), n, seed, lo, hi);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

void expect_grad(const char* name, float* p, const float* g, int64_t n,
                 const std::function<double()>& loss, float eps = kEps) {
  auto r = check_grad(p, g, n, loss, eps, 400, kFloor);
  print_result(name, r);
  EXPECT_LT(r.max_rel_err, kTol) << name;
}

TEST(KernelGradCheck, Matmul) {
  const int N = 5, C = 7, OC = 6;
  Vec x = rand_vec(N * C, 1), W = rand_vec(C * OC, 2), b = rand_vec(OC, 3), R = rand_vec(N * OC, 4);
  Vec y(N * OC);
  auto loss = [&] {
    matmul_forward(y.data(), x.data(), W.data(), b.data(), N, C, OC);
    return dot(y, R);
  };
  Vec dx(N * C, 123.f), dW(C * OC, 0.f), db(OC, 0.f);  // dx prefilled: it must be overwritten
  matmul_backward(dx.data(), dW.data(), db.data(), R.data(), x.data(), W.data(), N, C, OC);
  expect_grad("matmul dx", x.data(), dx.data(), N * C, loss);
  expect_grad("matmul dW", W.data(), dW.data(), C * OC, loss);
  expect_grad("matmul db", b.data(), db.data(), OC, loss);
  // dW and db accumulate: a second backward doubles them.
  Vec dW2 = dW, db2 = db;
  matmul_backward(nullptr, dW2.data(), db2.data(), R.data(), x.data(), W.data(), N, C, OC);
  for (int i = 0; i < C * OC; ++i) EXPECT_NEAR(dW2[i], 2 * dW[i], 1e-5);
  for (int i = 0; i < OC; ++i) EXPECT_NEAR(db2[i], 2 * db[i], 1e-5);
}

TEST(KernelGradCheck, MatmulTransposedWeight) {
  const int N = 5, C = 7, OC = 9;
  Vec x = rand_vec(N * C, 17), Wt = rand_vec(OC * C, 18), R = rand_vec(N * OC, 19), y(N * OC);
  auto loss = [&] {
    matmul_nt_forward(y.data(), x.data(), Wt.data(), N, C, OC);
    return dot(y, R);
  };
  Vec dx(N * C, 9.f), dWt(OC * C, 0.f);
  matmul_nt_backward(dx.data(), dWt.data(), R.data(), x.data(), Wt.data(), N, C, OC);
  expect_grad("matmul_nt dx", x.data(), dx.data(), N * C, loss);
  expect_grad("matmul_nt dWt", Wt.data(), dWt.data(), OC * C, loss);
}

TEST(KernelGradCheck, LayerNorm) {
  const int N = 4, C = 10;
  Vec x = rand_vec(N * C, 5, -2, 2), w = rand_vec(C, 6, 0.5f, 1.5f), b = rand_vec(C, 7);
  Vec R = rand_vec(N * C, 8), y(N * C), mean(N), rstd(N);
  auto loss = [&] {
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return dot(y, R);
  };
  loss();
  Vec dx(N * C, 0.f), dw(C, 0.f), db(C, 0.f);
  layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  expect_grad("layernorm dx", x.data(), dx.data(), N * C, loss);
  expect_grad("layernorm dw", w.data(), dw.data(), C, loss);
  expect_grad("layernorm db", b.data(), db.data(), C, loss);
  // dx accumulates (residual streams add into it).
  Vec dx2(N * C, 1.f), dw2(C, 0.f), db2(C, 0.f);
  layernorm_backward(dx2.data(), dw2.data(), db2.data(), R.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  for (int i = 0; i < N * C; ++i) EXPECT_NEAR(dx2[i], 1.f + dx[i], 1e-5);
}

TEST(KernelGradCheck, Gelu) {
  const int N = 64;
  Vec x = rand_vec(N, 9, -4, 4), R = rand_vec(N, 10), y(N);
  auto loss = [&] {
    gelu_forward(y.data(), x.data(), N);
    return dot(y, R);
  };
  Vec dx(N, 55.f);
  gelu_backward(dx.data(), x.data(), R.data(), N);
  expect_grad("gelu dx", x.data(), dx.data(), N, loss);
  Vec inplace = R;  // dx may alias dy
  gelu_backward(inplace.data(), x.data(), inplace.data(), N);
  for (int i = 0; i < N; ++i) EXPECT_FLOAT_EQ(inplace[i], dx[i]);
  // Spot values of the tanh approximation: gelu(0) = 0, gelu(1) ≈ 0.841192, gelu(-1) ≈ -0.158808.
  float xs[3] = {0.f, 1.f, -1.f}, ys[3];
  gelu_forward(ys, xs, 3);
  EXPECT_NEAR(ys[0], 0.0, 1e-7);
  EXPECT_NEAR(ys[1], 0.841192, 1e-5);
  EXPECT_NEAR(ys[2], -0.158808, 1e-5);
}

TEST(KernelGradCheck, Attention) {
  const int B = 2, T = 5, C = 8, H = 2;
  Vec qkv = rand_vec(B * T * 3 * C, 11, -1.5f, 1.5f), R = rand_vec(B * T * C, 12);
  Vec out(B * T * C), att(B * H * T * T), scratch(T * T);
  auto loss = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
    return dot(out, R);
  };
  loss();
  // Causal: probabilities above the diagonal are exactly 0 and every row sums to 1.
  for (int bh = 0; bh < B * H; ++bh)
    for (int i = 0; i < T; ++i) {
      double s = 0;
      for (int j = 0; j < T; ++j) {
        const float p = att[(bh * T + i) * T + j];
        if (j > i) {
          EXPECT_EQ(p, 0.f);
        }
        s += p;
      }
      EXPECT_NEAR(s, 1.0, 1e-6);
    }
  Vec dqkv(B * T * 3 * C, 77.f);
  attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), scratch.data(), B, T, C, H);
  expect_grad("attention dqkv", qkv.data(), dqkv.data(), B * T * 3 * C, loss);
  // Position 0 of each sequence sees only itself: its output is v_0 exactly.
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c) EXPECT_FLOAT_EQ(out[b * T * C + c], qkv[b * T * 3 * C + 2 * C + c]);
}

/// Σ loss through the steps of cross_entropy.h on one shard (the whole vocabulary: steps 1 and 2
/// as cross_entropy_max_sums), the gradient rounded to values of grad_dtype.
double cross_entropy(float* z, const int32_t* y, int N, int V, float dloss, bool backward,
                     DType grad_dtype = DType::kF32) {
  Vec m(N), sums(2 * N);
  cross_entropy_max_sums(m.data(), sums.data(), z, y, 0, N, V);
  return cross_entropy_loss(z, y, 0, N, V, m.data(), sums.data(), dloss, backward, grad_dtype);
}

TEST(KernelGradCheck, CrossEntropy) {
  const int N = 4, V = 11;
  const float dloss = 0.7f;
  Vec z = rand_vec(N * V, 13, -2, 2);
  std::vector<int32_t> y = {3, 0, 10, 3};
  auto loss = [&] {
    Vec tmp = z;
    return dloss * cross_entropy(tmp.data(), y.data(), N, V, dloss, false);
  };
  Vec g = z;
  const double l = cross_entropy(g.data(), y.data(), N, V, dloss, true);
  // Same value with and without backward (to f32 rounding: the two copies may be aligned
  // differently, and Eigen's vectorised sums peel unaligned heads).
  EXPECT_NEAR(dloss * l, loss(), 1e-6 * l);
  expect_grad("cross_entropy dlogits", z.data(), g.data(), N * V, loss);
  // Uniform logits: loss = ln V per row.
  Vec u(N * V, 0.5f);
  EXPECT_NEAR(cross_entropy(u.data(), y.data(), N, V, 1.f, false), N * std::log(V), 1e-5);
}

TEST(KernelGradCheck, CrossEntropyOverVocabularyShards) {
  // The vocabulary in two shards of rows [0,5) and [5,11), reduced by hand between the steps
  // (max, then sum) as the tensor-parallel group does: the same loss and the same gradient.
  const int N = 4, V = 11, V0 = 5;
  const float dloss = 0.3f;
  Vec z = rand_vec(N * V, 21, -3, 3);
  std::vector<int32_t> y = {3, 7, 10, 0};
  Vec full = z;
  const double l_full = cross_entropy(full.data(), y.data(), N, V, dloss, true);
  Vec a(N * V0), b(N * (V - V0));  // the two shards' logits
  for (int n = 0; n < N; ++n)
    for (int v = 0; v < V; ++v) (v < V0 ? a[n * V0 + v] : b[n * (V - V0) + v - V0]) = z[n * V + v];
  Vec ma(N), mb(N), sa(2 * N), sb(2 * N);
  cross_entropy_row_max(ma.data(), a.data(), N, V0);
  cross_entropy_row_max(mb.data(), b.data(), N, V - V0);
  for (int n = 0; n < N; ++n) ma[n] = mb[n] = std::max(ma[n], mb[n]);  // all_reduce max
  cross_entropy_exp_sums(sa.data(), a.data(), y.data(), 0, N, V0, ma.data());
  cross_entropy_exp_sums(sb.data(), b.data(), y.data(), V0, N, V - V0, mb.data());
  for (int i = 0; i < 2 * N; ++i) sa[i] = sb[i] = sa[i] + sb[i];  // all_reduce sum
  const double la = cross_entropy_loss(a.data(), y.data(), 0, N, V0, ma.data(), sa.data(), dloss,
                                       true, DType::kF32);
  const double lb = cross_entropy_loss(b.data(), y.data(), V0, N, V - V0, mb.data(), sb.data(),
                                       dloss, true, DType::kF32);
  EXPECT_NEAR(la, l_full, 1e-6 * l_full);
  EXPECT_EQ(la, lb);  // every rank computes the whole loss
  for (int n = 0; n < N; ++n)
    for (int v = 0; v < V; ++v)
      EXPECT_NEAR(v < V0 ? a[n * V0 + v] : b[n * (V - V0) + v - V0], full[n * V + v], 1e-6)
          << "row " << n << " vocab " << v;
}

// Steps 1 and 2 as one (cross_entropy_max_sums) give the two steps' m and sums bit for bit and
// leave the logits as they were; step 3 recomputes exp(z - m) from them. Under a 16-bit
// declaration the gradient it writes is the f32 gradient rounded to bf16, element for element.
TEST(KernelGradCheck, CrossEntropyStepsReadTheLogitsAndRoundTheGradientWhenAsked) {
  const int N = 5, V = 37;
  const Vec z = rand_vec(N * V, 31, -4, 4);
  const std::vector<int32_t> y = {0, 36, 5, 5, 20};
  Vec m1(N), s1(2 * N), m2(N), s2(2 * N), za = z, zb = z;
  cross_entropy_row_max(m1.data(), za.data(), N, V);
  cross_entropy_exp_sums(s1.data(), za.data(), y.data(), 0, N, V, m1.data());
  cross_entropy_max_sums(m2.data(), s2.data(), zb.data(), y.data(), 0, N, V);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(za, z) << "steps 1 and 2 wrote over the logits";
  EXPECT_EQ(zb, z) << "cross_entropy_max_sums wrote over the logits";
  for (int n = 0; n < N; ++n) EXPECT_EQ(s2[N + n], z[n * V + y[n]]) << "target logit, row " << n;

  Vec g32 = z, g16 = z;
  const double l32 = cross_entropy(g32.data(), y.data(), N, V, 0.25f, true, DType::kF32);
  const double l16 = cross_entropy(g16.data(), y.data(), N, V, 0.25f, true, DType::kBF16);
  EXPECT_EQ(l32, l16) << "the rounding is the gradient's, not the loss's";
  int64_t changed = 0;
  for (int i = 0; i < N * V; ++i) {
    EXPECT_EQ(g16[i], round_trip(g32[i], DType::kBF16)) << "element " << i;
    changed += g16[i] != g32[i];
  }
  EXPECT_GT(changed, N * V / 2) << "bf16 rounding left most fp32 gradients as they were";
  EXPECT_THROW(cross_entropy(g16.data(), y.data(), N, V, 1.0f, true, DType::kU8),
               std::invalid_argument);
}

TEST(KernelGradCheck, Embedding) {
  const int B = 2, T = 3, C = 4, V = 5, N = B * T;
  Vec wte = rand_vec(V * C, 14), wpe = rand_vec(T * C, 15), R = rand_vec(B * T * C, 16);
  std::vector<int32_t> tok = {1, 4, 1, 0, 1, 2};  // token 1 three times: its gradient accumulates
  Vec out(B * T * C);
  auto loss = [&] {
    token_embedding_forward(out.data(), tok.data(), wte.data(), 0, V, N, C);
    position_embedding_forward(out.data(), wpe.data(), B, T, 0, C);
    return dot(out, R);
  };
  Vec dwte(V * C, 0.f), dwpe(T * C, 0.f);
  token_embedding_backward(dwte.data(), R.data(), tok.data(), 0, V, N, C);
  position_embedding_backward(dwpe.data(), R.data(), B, T, 0, C);
  expect_grad("embedding dwte", wte.data(), dwte.data(), V * C, loss);
  expect_grad("embedding dwpe", wpe.data(), dwpe.data(), T * C, loss);
  for (int c = 0; c < C; ++c) EXPECT_EQ(dwte[3 * C + c], 0.f);  // token 3 never appears
  // A shard of rows [2,5): tokens outside it give zero rows, and only its rows get gradients.
  Vec part(N * C, 9.f), dpart(3 * C, 0.f);
  token_embedding_forward(part.data(), tok.data(), wte.data() + 2 * C, 2, 3, N, C);
  token_embedding_backward(dpart.data(), R.data(), tok.data(), 2, 3, N, C);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      EXPECT_EQ(part[n * C + c], tok[n] >= 2 ? wte[tok[n] * C + c] : 0.f) << n;
  for (int i = 0; i < 3 * C; ++i) EXPECT_EQ(dpart[i], dwte[2 * C + i]);
}

TEST(KernelGradCheck, BackwardHalvesComposeToTheFullBackward) {
  // matmul_backward = input half + weight half; layernorm_backward = dx-only + weight half.
  const int N = 5, C = 7, OC = 6;
  Vec x = rand_vec(N * C, 31), W = rand_vec(C * OC, 32), R = rand_vec(N * OC, 33);
  Vec dx(N * C), dW(C * OC, 0.f), db(OC, 0.f), dx2(N * C), dW2(C * OC, 0.f), db2(OC, 0.f);
  matmul_backward(dx.data(), dW.data(), db.data(), R.data(), x.data(), W.data(), N, C, OC);
  matmul_backward_input(dx2.data(), R.data(), W.data(), N, C, OC);
  matmul_backward_weight(dW2.data(), db2.data(), R.data(), x.data(), N, C, OC);
  EXPECT_EQ(dx, dx2);
  EXPECT_EQ(dW, dW2);
  EXPECT_EQ(db, db2);
  Vec w = rand_vec(C, 34, 0.5f, 1.5f), b = rand_vec(C, 35), y(N * C), mean(N), rstd(N);
  Vec Rl = rand_vec(N * C, 36);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  Vec lx(N * C, 0.f), lw(C, 0.f), lb(C, 0.f), lx2(N * C, 0.f), lw2(C, 0.f), lb2(C, 0.f);
  layernorm_backward(lx.data(), lw.data(), lb.data(), Rl.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  layernorm_backward(lx2.data(), nullptr, nullptr, Rl.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  layernorm_backward_weight(lw2.data(), lb2.data(), Rl.data(), x.data(), mean.data(), rstd.data(),
                            N, C);
  EXPECT_EQ(lx, lx2);
  EXPECT_EQ(lw, lw2);
  EXPECT_EQ(lb, lb2);
  Vec lw3(C, 0.f);  // the weight half without a bias gradient (as the CUDA twin allows)
  layernorm_backward_weight(lw3.data(), nullptr, Rl.data(), x.data(), mean.data(), rstd.data(),
                            N, C);
  EXPECT_EQ(lw3, lw);
}

}  // namespace
}  // namespace cpu
}  // namespace llmp
