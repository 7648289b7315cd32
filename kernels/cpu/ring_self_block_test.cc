// Ring self-attention's kernels (ring_self_block.h) on the CPU:
//
//   WholeSequence*   at p = 1 (g0 = 0, Tl = T) the core's calls — S = (Q/√hs) Kᵀ, the causal
//                    softmax, Y = P V; dP = dO Vᵀ, its backward, dV = Pᵀ dO, dK = dSᵀ Q,
//                    dQ = dS K — are whole-sequence causal attention: P, out and dqkv must match
//                    attention.h's
//   Product*         every transpose pair, beta 0 (over NaN: C not read), 1 and 0.5, padded row
//                    strides and batch strides, against a triple loop in double; FLOPs counted
//                    2·M·N·K·batch
//   Softmax*         rows of rank r = 1 of p = 3 (g0 = Tl): row i's live length is g0 + i + 1,
//                    against a softmax and its backward in double, the tail exactly 0 though it
//                    held NaN
//
// Bound: 1e-5 of max(1, max |reference|): both sides sum the same fp32 terms (≤ 16 per output,
// inputs in [-1, 1)) in another order, a few ulp of the largest value.
//
// Glossary: B batch, T sequence, C channels, H heads, hs = C/H, Tl rows of a rank, g0 = r·Tl.
#include "kernels/cpu/ring_self_block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/testing/max_or_nan.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/flops.h"

namespace llmp {
namespace cpu {
namespace {

using Vec = std::vector<float>;
constexpr double kBound = 1e-5;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Vec rnd(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Vec v(n);
  for (float& x : v) x = u(g);
  return v;
}

/// max |got − want| / max(1, max |want|).
double rel(const Vec& got, const std::vector<double>& want) {
  double d = 0, s = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    d = testing::max_or_nan(d, std::fabs(got[i] - want[i]));
    s = testing::max_or_nan(s, std::fabs(want[i]));
  }
  return d / s;
}
std::vector<double> wide(const Vec& v) { return std::vector<double>(v.begin(), v.end()); }

TEST(RingSelfBlock, WholeSequenceIsCausalAttention) {
  constexpr int B = 2, T = 13, C = 12, H = 3, hs = C / H, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  const Vec qkv = rnd(size_t(B) * T * C3, 1), dout = rnd(size_t(B) * T * C, 2);
  const int64_t hb = int64_t(T) * T;  // head stride of (B,H,T,T)
  Vec P(size_t(B) * H * T * T, kNaN), y(size_t(B) * T * C, kNaN), dP(P.size(), kNaN),
      dqkv(qkv.size(), kNaN);
  for (int b = 0; b < B; ++b) {
    const float* x = qkv.data() + b * T * C3;
    gemm_strided_batched(false, true, T, T, hs, scale, x, C3, hs, x + C, C3, hs, 0.0f,
                         P.data() + b * H * hb, T, hb, H);
  }
  causal_softmax_rows(P.data(), int64_t(B) * H * T, T, T, 0);
  for (int b = 0; b < B; ++b) {
    const float* x = qkv.data() + b * T * C3;
    const float* dy = dout.data() + b * T * C;
    float* dx = dqkv.data() + b * T * C3;
    const float* Pb = P.data() + b * H * hb;
    gemm_strided_batched(false, false, T, hs, T, 1.0f, Pb, T, hb, x + 2 * C, C3, hs, 0.0f,
                         y.data() + b * T * C, C, hs, H);                       // Y = P V
    gemm_strided_batched(false, true, T, T, hs, 1.0f, dy, C, hs, x + 2 * C, C3, hs, 0.0f,
                         dP.data() + b * H * hb, T, hb, H);                     // dP = dO Vᵀ
    gemm_strided_batched(true, false, T, hs, T, 1.0f, Pb, T, hb, dy, C, hs, 0.0f, dx + 2 * C, C3,
                         hs, H);                                                // dV = Pᵀ dO
  }
  causal_softmax_rows_backward(dP.data(), P.data(), int64_t(B) * H * T, T, T, 0, scale);
  for (int b = 0; b < B; ++b) {
    const float* x = qkv.data() + b * T * C3;
    float* dx = dqkv.data() + b * T * C3;
    const float* dS = dP.data() + b * H * hb;
    gemm_strided_batched(true, false, T, hs, T, 1.0f, dS, T, hb, x, C3, hs, 0.0f, dx + C, C3, hs,
                         H);                                                    // dK = dSᵀ Q
    gemm_strided_batched(false, false, T, hs, T, 1.0f, dS, T, hb, x + C, C3, hs, 0.0f, dx, C3, hs,
                         H);                                                    // dQ = dS K
  }
  Vec att(P.size()), ref_y(y.size()), ref_dqkv(qkv.size()), scratch(size_t(T) * T);
  attention_forward(ref_y.data(), att.data(), qkv.data(), B, T, C, H);
  attention_backward(ref_dqkv.data(), dout.data(), qkv.data(), att.data(), scratch.data(), B, T,
                     C, H);
  EXPECT_LT(rel(P, wide(att)), kBound) << "P";
  EXPECT_LT(rel(y, wide(ref_y)), kBound) << "out";
  EXPECT_LT(rel(dqkv, wide(ref_dqkv)), kBound) << "dqkv";
}

TEST(RingSelfBlock, ProductOfEveryTransposeAndBeta) {
  constexpr int M = 5, N = 7, K = 3, batch = 3, pad = 2;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {0.0f, 1.0f, 0.5f}) {
        SCOPED_TRACE("trans_a " + std::to_string(ta) + " trans_b " + std::to_string(tb) +
                     " beta " + std::to_string(beta));
        const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K,
                  b_cols = tb ? K : N;
        const int lda = a_cols + pad, ldb = b_cols + pad + 1, ldc = N + pad;
        const int64_t sa = int64_t(a_rows) * lda + 1, sb = int64_t(b_rows) * ldb + 3,
                      sc = int64_t(M) * ldc + 2;
        const Vec A = rnd(size_t(sa) * batch, 10), Bm = rnd(size_t(sb) * batch, 11);
        Vec C = beta == 0.0f ? Vec(size_t(sc) * batch, kNaN) : rnd(size_t(sc) * batch, 12);
        std::vector<double> want = wide(C);
        for (int i = 0; i < batch; ++i)
          for (int m = 0; m < M; ++m)
            for (int n = 0; n < N; ++n) {
              double acc = 0;
              for (int k = 0; k < K; ++k)
                acc += double(A[i * sa + (ta ? k * lda + m : m * lda + k)]) *
                       double(Bm[i * sb + (tb ? n * ldb + k : k * ldb + n)]);
              double& c = want[i * sc + m * ldc + n];
              c = 0.75 * acc + (beta == 0.0f ? 0.0 : beta * c);
            }
        const int64_t f0 = flops_done();
        gemm_strided_batched(ta, tb, M, N, K, 0.75f, A.data(), lda, sa, Bm.data(), ldb, sb, beta,
                             C.data(), ldc, sc, batch);
        EXPECT_EQ(flops_done() - f0, 2L * M * N * K * batch);
        // Outside the (M,N) blocks C is untouched: NaN stays NaN there at beta 0.
        for (size_t i = 0; i < C.size(); ++i) {
          const bool in = (i % sc) / ldc < size_t(M) && (i % sc) % ldc < size_t(N);
          if (in) EXPECT_NEAR(C[i], want[i], kBound) << "element " << i;
          else if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(C[i])) << "element " << i;
          else EXPECT_EQ(C[i], float(want[i])) << "element " << i;
        }
      }
}

TEST(RingSelfBlock, SoftmaxAndItsBackwardByGlobalPosition) {
  constexpr int Tl = 4, p = 3, r = 1, T = p * Tl, g0 = r * Tl, rows = 2 * Tl;  // two (b, h)
  constexpr float scale = 0.5f;
  const Vec S0 = rnd(size_t(rows) * T, 20), dP0 = rnd(size_t(rows) * T, 21);
  Vec P = S0, dS = dP0;
  for (int k = 0; k < rows; ++k)  // the tail (the future chunk) holds garbage
    for (int j = g0 + k % Tl + 1; j < T; ++j) P[k * T + j] = dS[k * T + j] = kNaN;
  causal_softmax_rows(P.data(), rows, Tl, T, g0);
  causal_softmax_rows_backward(dS.data(), P.data(), rows, Tl, T, g0, scale);
  std::vector<double> wantP(P.size(), 0.0), wantdS(P.size(), 0.0);
  for (int k = 0; k < rows; ++k) {
    const int live = g0 + k % Tl + 1;  // keys 0..g
    double mx = -1e30, sum = 0, dot = 0;
    for (int j = 0; j < live; ++j) mx = std::max(mx, double(S0[k * T + j]));
    for (int j = 0; j < live; ++j) sum += std::exp(S0[k * T + j] - mx);
    for (int j = 0; j < live; ++j) wantP[k * T + j] = std::exp(S0[k * T + j] - mx) / sum;
    for (int j = 0; j < live; ++j) dot += wantP[k * T + j] * dP0[k * T + j];
    for (int j = 0; j < live; ++j)
      wantdS[k * T + j] = scale * wantP[k * T + j] * (dP0[k * T + j] - dot);
    for (int j = live; j < T; ++j) {
      EXPECT_EQ(P[k * T + j], 0.0f) << "row " << k << " key " << j << ": masked P is exactly 0";
      EXPECT_EQ(dS[k * T + j], 0.0f) << "row " << k << " key " << j << ": masked dS is exactly 0";
    }
  }
  EXPECT_LT(rel(P, wantP), kBound) << "P";
  EXPECT_LT(rel(dS, wantdS), kBound) << "dS";
}

}  // namespace
}  // namespace cpu
}  // namespace llmp
