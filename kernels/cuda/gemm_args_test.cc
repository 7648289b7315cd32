// The cuBLAS mapping checked without a GPU: each GemmArgs of gemm_args.h is evaluated by a host
// emulation of cublasSgemmStridedBatched's column-major semantics and compared with kernels/cpu.
//
// The emulation follows the cuBLAS reference (docs: cublas<t>gemmStridedBatched): C_i(r,c) at
// C[i·strideC + r + c·ldc], op(A)(r,l) = A[r + l·lda] (N) or A[l + r·lda] (T), and it rejects
// what cuBLAS rejects with CUBLAS_STATUS_INVALID_VALUE (lda < rows of the stored A, ...). Every
// element it reads or writes through A, B or C must lie inside the registered buffer that A, B or
// C points into, so a wrong leading dimension or stride that walks off its buffer fails even
// where the values would not.
//
// Shapes: matmul N = 6, C = 10, OC = 14; attention B = 2, T = 7, C = 12, H = 3 (hs = 4): every
// dimension distinct, so a swapped m/n/k or ld changes the result. Bound: both sides sum the same
// fp32 products in different orders (Eigen blocks, the emulation goes in index order); with
// inputs in [-1, 1) and k ≤ 14 terms the difference is a few ulp of Σ|terms| (≤ 14), ~1e-6:
// we allow 2e-5 absolute.
#include "kernels/cuda/gemm_args.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/testing/max_or_nan.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ring_self_block.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

constexpr float kBound = 2e-5f;

using Vec = std::vector<float>;

Vec rnd(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Vec v(n);
  for (float& x : v) x = u(g);
  return v;
}

float max_diff(const Vec& a, const Vec& b) {
  float d = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) d = testing::max_or_nan(d, std::fabs(a[i] - b[i]));
  return d;
}

/// The buffers a GEMM may touch; an access outside all of them fails the test.
struct Buffers {
  std::vector<std::pair<const float*, size_t>> bufs;
  void add(const Vec& v) { bufs.emplace_back(v.data(), v.size()); }
  /// The buffer holding p, or nullptr.
  const std::pair<const float*, size_t>* owner(const float* p) const {
    for (auto& b : bufs)
      if (p >= b.first && p < b.first + b.second) return &b;
    return nullptr;
  }
  /// p lies in the buffer `base` lies in (an operand never runs into a neighbouring buffer).
  bool inside(const float* base, const float* p) const {
    const auto* b = owner(base);
    return b && p >= b->first && p < b->first + b->second;
  }
};

/// cublasSgemmStridedBatched on the host. Returns "" or what cuBLAS / the bounds would reject.
std::string emulate(const GemmArgs& g, const Buffers& bufs) {
  const int a_rows = g.transa ? g.k : g.m, b_rows = g.transb ? g.n : g.k;
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.lda < std::max(1, a_rows) || g.ldb < std::max(1, b_rows) ||
      g.ldc < std::max(1, g.m))
    return std::string("invalid value: m, n, k or a leading dimension (A = ") + g.a_name +
           ", B = " + g.b_name + ", C = " + g.c_name + ")";
  for (int bi = 0; bi < g.batch; ++bi) {
    const float* A = g.A + bi * g.strideA;
    const float* B = g.B + bi * g.strideB;
    float* C = g.C + bi * g.strideC;
    for (int c = 0; c < g.n; ++c)
      for (int r = 0; r < g.m; ++r) {
        float acc = 0.0f;
        for (int l = 0; l < g.k; ++l) {
          const float* a = g.transa ? &A[l + static_cast<int64_t>(r) * g.lda]
                                    : &A[r + static_cast<int64_t>(l) * g.lda];
          const float* b = g.transb ? &B[c + static_cast<int64_t>(l) * g.ldb]
                                    : &B[l + static_cast<int64_t>(c) * g.ldb];
          if (!bufs.inside(g.A, a)) return std::string("read off its buffer: ") + g.a_name;
          if (!bufs.inside(g.B, b)) return std::string("read off its buffer: ") + g.b_name;
          acc += *a * *b;
        }
        float* out = &C[r + static_cast<int64_t>(c) * g.ldc];
        if (!bufs.inside(g.C, out)) return std::string("write off its buffer: ") + g.c_name;
        *out = g.alpha * acc + (g.beta == 0.0f ? 0.0f : g.beta * *out);  // β = 0: C not read
      }
  }
  return "";
}

constexpr int N = 6, C = 10, OC = 14;

struct MatmulData {
  Vec x = rnd(N * C, 1), W = rnd(C * OC, 2), Wt = rnd(OC * C, 3), b = rnd(OC, 4),
      dy = rnd(N * OC, 5);
  Buffers all(std::initializer_list<const Vec*> outs) const {
    Buffers bf;
    for (const Vec* v : {&x, &W, &Wt, &b, &dy}) bf.add(*v);
    for (const Vec* v : outs) bf.add(*v);
    return bf;
  }
};

TEST(GemmArgs, MatmulForwardWithAndWithoutBias) {
  MatmulData d;
  for (bool bias : {false, true}) {
    Vec y(N * OC, 7.0f), ref(N * OC);  // y starts as garbage: β = 0 must ignore it
    if (bias)
      for (int n = 0; n < N; ++n) std::copy(d.b.begin(), d.b.end(), y.begin() + n * OC);
    ASSERT_EQ(
        emulate(matmul_forward_gemm(y.data(), d.x.data(), d.W.data(), N, C, OC, bias ? 1.0f : 0.0f),
                d.all({&y})),
        "");
    cpu::matmul_forward(ref.data(), d.x.data(), d.W.data(), bias ? d.b.data() : nullptr, N, C, OC);
    EXPECT_LE(max_diff(y, ref), kBound) << "bias " << bias;
  }
}

TEST(GemmArgs, MatmulBackwardInputOverwritesAndWeightAccumulates) {
  MatmulData d;
  Vec dx(N * C, 7.0f), ref_dx(N * C);
  ASSERT_EQ(emulate(matmul_backward_input_gemm(dx.data(), d.dy.data(), d.W.data(), N, C, OC),
                    d.all({&dx})),
            "");
  cpu::matmul_backward_input(ref_dx.data(), d.dy.data(), d.W.data(), N, C, OC);
  EXPECT_LE(max_diff(dx, ref_dx), kBound);

  Vec dW = rnd(C * OC, 9), ref_dW = dW;  // nonzero start: += is checked
  ASSERT_EQ(emulate(matmul_backward_weight_gemm(dW.data(), d.dy.data(), d.x.data(), N, C, OC),
                    d.all({&dW})),
            "");
  cpu::matmul_backward_weight(ref_dW.data(), nullptr, d.dy.data(), d.x.data(), N, C, OC);
  EXPECT_LE(max_diff(dW, ref_dW), kBound);
}

TEST(GemmArgs, MatmulNtForwardAndBackward) {
  MatmulData d;
  Vec y(N * OC, 7.0f), ref(N * OC);
  ASSERT_EQ(
      emulate(matmul_nt_forward_gemm(y.data(), d.x.data(), d.Wt.data(), N, C, OC), d.all({&y})),
      "");
  cpu::matmul_nt_forward(ref.data(), d.x.data(), d.Wt.data(), N, C, OC);
  EXPECT_LE(max_diff(y, ref), kBound);

  Vec dx(N * C, 7.0f), dWt = rnd(OC * C, 11), ref_dx(N * C), ref_dWt = dWt;
  ASSERT_EQ(emulate(matmul_nt_backward_input_gemm(dx.data(), d.dy.data(), d.Wt.data(), N, C, OC),
                    d.all({&dx, &dWt})),
            "");
  ASSERT_EQ(emulate(matmul_nt_backward_weight_gemm(dWt.data(), d.dy.data(), d.x.data(), N, C, OC),
                    d.all({&dx, &dWt})),
            "");
  cpu::matmul_nt_backward(ref_dx.data(), ref_dWt.data(), d.dy.data(), d.x.data(), d.Wt.data(), N, C,
                          OC);
  EXPECT_LE(max_diff(dx, ref_dx), kBound);
  EXPECT_LE(max_diff(dWt, ref_dWt), kBound);
}

// The test can fail: the forward's call with one flag or one leading dimension changed is
// rejected or gives a different product.
TEST(GemmArgs, AMutatedMappingIsCaught) {
  MatmulData d;
  Vec ref(N * OC);
  cpu::matmul_forward(ref.data(), d.x.data(), d.W.data(), nullptr, N, C, OC);
  for (int mutation = 0; mutation < 4; ++mutation) {
    Vec y(N * OC, 0.0f);
    GemmArgs g = matmul_forward_gemm(y.data(), d.x.data(), d.W.data(), N, C, OC, 0.0f);
    if (mutation == 0) g.transa = true;
    if (mutation == 1) g.transb = true;
    if (mutation == 2) std::swap(g.lda, g.ldb);
    if (mutation == 3) std::swap(g.A, g.B);
    const std::string err = emulate(g, d.all({&y}));
    EXPECT_TRUE(!err.empty() || max_diff(y, ref) > kBound) << "mutation " << mutation;
  }
}

// ---- Attention: the GPU's sequence of products and row kernels, emulated ----------------------

constexpr int AB = 2, AT = 7, AC = 12, AH = 3;

/// The causal softmax kernel's arithmetic, row by row (attention.cu causal_softmax_kernel).
void softmax_rows(float* att, int rows, int T, float scale) {
  for (int r = 0; r < rows; ++r) {
    float* row = att + static_cast<int64_t>(r) * T;
    const int i = r % T;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j <= i; ++j) mx = std::max(mx, row[j]);
    for (int j = 0; j <= i; ++j) sum += row[j] = softmax_exp(row[j], mx, scale);
    for (int j = 0; j < T; ++j) row[j] = j <= i ? row[j] * (1.0f / sum) : 0.0f;
  }
}

TEST(GemmArgs, AttentionForwardMatchesTheCpu) {
  const Vec qkv = rnd(AB * AT * 3 * AC, 21);
  Vec out(AB * AT * AC, 7.0f), att(AB * AH * AT * AT, 7.0f), ref_out(out.size()),
      ref_att(att.size());
  Buffers bf;
  for (const Vec* v : std::initializer_list<const Vec*>{&qkv, &out, &att}) bf.add(*v);
  for (int b = 0; b < AB; ++b)
    ASSERT_EQ(emulate(attention_scores_gemm(att.data() + b * AH * AT * AT, qkv.data(), b, AT, AC,
                                            AH),
                      bf),
              "");
  softmax_rows(att.data(), AB * AH * AT, AT, 1.0f / std::sqrt(static_cast<float>(AC / AH)));
  for (int b = 0; b < AB; ++b)
    ASSERT_EQ(emulate(attention_pv_gemm(out.data(), att.data() + b * AH * AT * AT, qkv.data(), b,
                                        AT, AC, AH),
                      bf),
              "");
  cpu::attention_forward(ref_out.data(), ref_att.data(), qkv.data(), AB, AT, AC, AH);
  EXPECT_LE(max_diff(att, ref_att), kBound);
  EXPECT_LE(max_diff(out, ref_out), kBound);
}

TEST(GemmArgs, AttentionBackwardMatchesTheCpu) {
  const Vec qkv = rnd(AB * AT * 3 * AC, 31), dout = rnd(AB * AT * AC, 32);
  Vec out(AB * AT * AC), att(AB * AH * AT * AT), scratch(AT * AT);
  cpu::attention_forward(out.data(), att.data(), qkv.data(), AB, AT, AC, AH);
  Vec dqkv(qkv.size(), 7.0f), ref(qkv.size()), dP(AH * AT * AT);
  Buffers bf;
  for (const Vec* v : std::initializer_list<const Vec*>{&qkv, &dout, &att, &dqkv, &dP}) bf.add(*v);
  const float scale = 1.0f / std::sqrt(static_cast<float>(AC / AH));
  for (int b = 0; b < AB; ++b) {
    ASSERT_EQ(emulate(attention_dp_gemm(dP.data(), dout.data(), qkv.data(), b, AT, AC, AH), bf),
              "");
    ASSERT_EQ(emulate(attention_dv_gemm(dqkv.data(), att.data() + b * AH * AT * AT, dout.data(), b,
                                        AT, AC, AH),
                      bf),
              "");
    for (int r = 0; r < AH * AT; ++r) {  // attention.cu softmax_backward_kernel, row by row
      const int i = r % AT;
      const float* p = att.data() + (static_cast<int64_t>(b) * AH * AT + r) * AT;
      float* d = dP.data() + static_cast<int64_t>(r) * AT;
      float dot = 0.0f;
      for (int j = 0; j <= i; ++j) dot += p[j] * d[j];
      for (int j = 0; j < AT; ++j) d[j] = j <= i ? softmax_grad(p[j], d[j], dot, scale) : 0.0f;
    }
    ASSERT_EQ(emulate(attention_dq_gemm(dqkv.data(), dP.data(), qkv.data(), b, AT, AC, AH), bf),
              "");
    ASSERT_EQ(emulate(attention_dk_gemm(dqkv.data(), dP.data(), qkv.data(), b, AT, AC, AH), bf),
              "");
  }
  cpu::attention_backward(ref.data(), dout.data(), qkv.data(), att.data(), scratch.data(), AB, AT,
                          AC, AH);
  EXPECT_LE(max_diff(dqkv, ref), kBound);
}


// ---- row_major_gemm (ring self-attention's products) against kernels/cpu's gemm_strided_batched -

// Every transpose pair, beta 0 (C garbage: not read) and 1, a batch of 3 with padded row strides
// and batch strides: the emulated cuBLAS call equals the row-major CPU product.
TEST(GemmArgs, RowMajorStridedBatchedEveryTranspose) {
  constexpr int M = 5, Nn = 7, K = 3, batch = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {0.0f, 1.0f}) {
        const int lda = (ta ? M : K) + 2, ldb = (tb ? K : Nn) + 1, ldc = Nn + 3;
        const int64_t sa = int64_t(ta ? K : M) * lda, sb = int64_t(tb ? Nn : K) * ldb,
                      sc = int64_t(M) * ldc;
        const Vec A = rnd(sa * batch, 30), B = rnd(sb * batch, 31);
        Vec got = beta == 0.0f ? Vec(sc * batch, 7.0f) : rnd(sc * batch, 32), ref = got;
        Buffers bf;
        bf.add(A);
        bf.add(B);
        bf.add(got);
        ASSERT_EQ(emulate(row_major_gemm(ta, tb, M, Nn, K, 0.5f, A.data(), lda, sa, B.data(), ldb,
                                         sb, beta, got.data(), ldc, sc, batch),
                          bf),
                  "")
            << "trans_a " << ta << " trans_b " << tb;
        cpu::gemm_strided_batched(ta, tb, M, Nn, K, 0.5f, A.data(), lda, sa, B.data(), ldb, sb,
                                  beta, ref.data(), ldc, sc, batch);
        EXPECT_LE(max_diff(got, ref), kBound) << "trans_a " << ta << " trans_b " << tb
                                              << " beta " << beta;
      }
}

// ---- the 16-bit copies (matmul.cu run_product) -----------------------------------------------

// Under a 16-bit declaration matmul.cu multiplies copies of [A, A + a_extent) and [B, B +
// b_extent) with the same leading dimensions and strides. On exact-size copies every product of
// matmul.h (and a strided batch with padded rows) reads inside them (the emulation's bounds) and
// gives the CPU's product; and the extents never run past the operand's buffer, which the copy
// would read off on the GPU.
void run_on_copies(GemmArgs g, const Buffers& originals, Vec& out, const Vec& ref,
                   const char* what) {
  for (const float* op : {g.A, g.B}) ASSERT_NE(originals.owner(op), nullptr) << what;
  const auto* a = originals.owner(g.A);
  const auto* b = originals.owner(g.B);
  EXPECT_LE(g.A + a_extent(g), a->first + a->second) << what << ": A's copy reads off its buffer";
  EXPECT_LE(g.B + b_extent(g), b->first + b->second) << what << ": B's copy reads off its buffer";
  const Vec a16(g.A, g.A + a_extent(g)), b16(g.B, g.B + b_extent(g));
  g.A = a16.data(), g.B = b16.data();
  Buffers copies;
  copies.add(a16);
  copies.add(b16);
  copies.add(out);
  ASSERT_EQ(emulate(g, copies), "") << what;
  EXPECT_LE(max_diff(out, ref), kBound) << what;
}

TEST(GemmArgs, SixteenBitCopiesHoldEveryElementAProductReads) {
  MatmulData d;
  Vec y(N * OC), ref_y(N * OC), dx(N * C), ref_dx(N * C), dW(C * OC, 0.f), ref_dW(C * OC, 0.f);
  const Buffers all = d.all({});
  cpu::matmul_forward(ref_y.data(), d.x.data(), d.W.data(), nullptr, N, C, OC);
  run_on_copies(matmul_forward_gemm(y.data(), d.x.data(), d.W.data(), N, C, OC, 0.0f), all, y,
                ref_y, "y = x W");
  cpu::matmul_backward_input(ref_dx.data(), d.dy.data(), d.W.data(), N, C, OC);
  run_on_copies(matmul_backward_input_gemm(dx.data(), d.dy.data(), d.W.data(), N, C, OC), all, dx,
                ref_dx, "dx = dy Wt");
  cpu::matmul_backward_weight(ref_dW.data(), nullptr, d.dy.data(), d.x.data(), N, C, OC);
  run_on_copies(matmul_backward_weight_gemm(dW.data(), d.dy.data(), d.x.data(), N, C, OC), all, dW,
                ref_dW, "dW = xt dy");
  cpu::matmul_nt_forward(ref_y.data(), d.x.data(), d.Wt.data(), N, C, OC);
  run_on_copies(matmul_nt_forward_gemm(y.data(), d.x.data(), d.Wt.data(), N, C, OC), all, y,
                ref_y, "head y = x Wt");
  Vec dWt(OC * C, 0.f), ref_dWt(OC * C, 0.f);
  cpu::matmul_nt_backward(ref_dx.data(), ref_dWt.data(), d.dy.data(), d.x.data(), d.Wt.data(), N,
                          C, OC);
  run_on_copies(matmul_nt_backward_input_gemm(dx.data(), d.dy.data(), d.Wt.data(), N, C, OC), all,
                dx, ref_dx, "head dx = dy Wt");
  run_on_copies(matmul_nt_backward_weight_gemm(dWt.data(), d.dy.data(), d.x.data(), N, C, OC), all,
                dWt, ref_dWt, "head dWt = dyt x");
  // A batch of 3 with padded rows and batch strides, every transpose pair: the copies end at the
  // last element the last batch entry reads, short of the buffers' padding.
  constexpr int M = 5, Nn = 7, K = 3, batch = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int lda = (ta ? M : K) + 2, ldb = (tb ? K : Nn) + 1, ldc = Nn;
      const int64_t sa = int64_t(ta ? K : M) * lda, sb = int64_t(tb ? Nn : K) * ldb, sc = M * ldc;
      const Vec A = rnd(sa * batch, 40), B = rnd(sb * batch, 41);
      Vec got(sc * batch), ref(sc * batch);
      Buffers bf;
      bf.add(A);
      bf.add(B);
      cpu::gemm_strided_batched(ta, tb, M, Nn, K, 1.0f, A.data(), lda, sa, B.data(), ldb, sb, 0.0f,
                                ref.data(), ldc, sc, batch);
      const GemmArgs g = row_major_gemm(ta, tb, M, Nn, K, 1.0f, A.data(), lda, sa, B.data(), ldb,
                                        sb, 0.0f, got.data(), ldc, sc, batch);
      EXPECT_LT(a_extent(g) + b_extent(g), int64_t(A.size() + B.size()));  // the padding is left
      run_on_copies(g, bf, got, ref, ta ? (tb ? "batched TT" : "batched TN")
                                        : (tb ? "batched NT" : "batched NN"));
    }
  EXPECT_EQ(operand_extent(false, 0, 4, 8), 0);  // an empty operand copies nothing
}

}  // namespace
}  // namespace cuda
}  // namespace llmp
