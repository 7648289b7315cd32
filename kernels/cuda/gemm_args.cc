// The cuBLAS arguments of every product (see gemm_args.h for the row-major/column-major rule).
//
// Notation in the derivations: "x is (r,c) row-major, ld L" means the column-major view x' of the
// same bytes is xᵀ (c,r) with leading dimension L. A row-major product P = X·Y is computed as
// P' = Pᵀ = Yᵀ·Xᵀ = Y'·X' (op N on both) — or with op T where we need the matrix itself, not its
// transpose, out of a buffer whose column-major view is the transpose.
#include "kernels/cuda/gemm_args.h"

namespace llmp {
namespace cuda {
namespace {

GemmArgs gemm(bool ta, bool tb, int m, int n, int k, const float* A, const char* an, int lda,
              const float* B, const char* bn, int ldb, float* C, const char* cn, int ldc,
              float alpha, float beta) {
  GemmArgs g;
  g.transa = ta;
  g.transb = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.A = A;
  g.a_name = an;
  g.lda = lda;
  g.B = B;
  g.b_name = bn;
  g.ldb = ldb;
  g.C = C;
  g.c_name = cn;
  g.ldc = ldc;
  g.alpha = alpha;
  g.beta = beta;
  return g;
}

/// Batched over the H heads of one batch entry: stride hs along qkv/out's channels, T·T along
/// att/dP's (T,T) blocks.
GemmArgs batched(GemmArgs g, int H, int64_t sA, int64_t sB, int64_t sC) {
  g.batch = H;
  g.strideA = sA;
  g.strideB = sB;
  g.strideC = sC;
  return g;
}

}  // namespace

int64_t operand_extent(bool trans, int rows, int cols, int ld) {
  if (rows <= 0 || cols <= 0) return 0;
  return trans ? int64_t{ld} * (rows - 1) + cols : int64_t{ld} * (cols - 1) + rows;
}

int64_t a_extent(const GemmArgs& g) {
  const int64_t one = operand_extent(g.transa, g.m, g.k, g.lda);
  return one == 0 ? 0 : one + int64_t{g.batch - 1} * g.strideA;
}

int64_t b_extent(const GemmArgs& g) {
  const int64_t one = operand_extent(g.transb, g.k, g.n, g.ldb);
  return one == 0 ? 0 : one + int64_t{g.batch - 1} * g.strideB;
}

// y (N,OC) = x (N,C) W (C,OC).  y' = yᵀ (OC,N) ld OC;  W' = Wᵀ (OC,C) ld OC;  x' = xᵀ (C,N) ld C.
// yᵀ = Wᵀ xᵀ = W' x':  m = OC, n = N, k = C, A = W (N, lda OC), B = x (N, ldb C), ldc OC.
GemmArgs matmul_forward_gemm(float* y, const float* x, const float* W, int N, int C, int OC,
                             float beta) {
  return gemm(false, false, OC, N, C, W, "W", OC, x, "x", C, y, "y", OC, 1.0f, beta);
}

// dx (N,C) = dy (N,OC) Wᵀ.  dxᵀ (C,N) = W dyᵀ.  W' = Wᵀ (OC,C) ld OC, so W = op T of W';
// dy' = dyᵀ (OC,N) ld OC, op N.  m = C, n = N, k = OC, ldc C.
GemmArgs matmul_backward_input_gemm(float* dx, const float* dy, const float* W, int N, int C,
                                    int OC) {
  return gemm(true, false, C, N, OC, W, "W", OC, dy, "dy", OC, dx, "dx", C, 1.0f, 0.0f);
}

// dW (C,OC) += xᵀ dy.  dWᵀ (OC,C) = dyᵀ x.  dy' = dyᵀ (OC,N) ld OC, op N;  x' = xᵀ (C,N) ld C,
// so x (N,C) = op T of x'.  m = OC, n = C, k = N, ldc OC, β = 1 (accumulate).
GemmArgs matmul_backward_weight_gemm(float* dW, const float* dy, const float* x, int N, int C,
                                     int OC) {
  return gemm(false, true, OC, C, N, dy, "dy", OC, x, "x", C, dW, "dW", OC, 1.0f, 1.0f);
}

// y (N,OC) = x Wtᵀ, Wt (OC,C).  yᵀ (OC,N) = Wt xᵀ.  Wt' = Wtᵀ (C,OC) ld C, so Wt = op T;
// x' = xᵀ (C,N) ld C, op N.  m = OC, n = N, k = C, ldc OC.
GemmArgs matmul_nt_forward_gemm(float* y, const float* x, const float* Wt, int N, int C, int OC) {
  return gemm(true, false, OC, N, C, Wt, "Wt", C, x, "x", C, y, "y", OC, 1.0f, 0.0f);
}

// dx (N,C) = dy Wt.  dxᵀ (C,N) = Wtᵀ dyᵀ = Wt' dy'.  Wt' (C,OC) ld C, dy' (OC,N) ld OC, op N both.
// m = C, n = N, k = OC, ldc C.
GemmArgs matmul_nt_backward_input_gemm(float* dx, const float* dy, const float* Wt, int N, int C,
                                       int OC) {
  return gemm(false, false, C, N, OC, Wt, "Wt", C, dy, "dy", OC, dx, "dx", C, 1.0f, 0.0f);
}

// dWt (OC,C) += dyᵀ x.  dWtᵀ (C,OC) = xᵀ dy.  x' = xᵀ (C,N) ld C, op N;  dy' = dyᵀ (OC,N) ld OC,
// so dy (N,OC) = op T.  m = C, n = OC, k = N, ldc C, β = 1.
GemmArgs matmul_nt_backward_weight_gemm(float* dWt, const float* dy, const float* x, int N, int C,
                                        int OC) {
  return gemm(false, true, C, OC, N, x, "x", C, dy, "dy", OC, dWt, "dWt", C, 1.0f, 1.0f);
}

// Attention, batch entry b, head h (the batch index of the call). Q, K, V of head h are (T,hs)
// row-major with row stride 3C at qkv + b·T·3C + h·hs (+C for K, +2C for V): their column-major
// views are Qᵀ, Kᵀ, Vᵀ (hs,T) with ld 3C, and head h+1 starts hs floats later (stride hs).
// The (T,T) block of head h in an entry's (H,T,T) block S/P/dP/dS is at h·T·T, ld T: its view
// is the transpose.
// out's Y of head h is (T,hs) at out + b·T·C + h·hs, row stride C: its view is Yᵀ ld C.

namespace {
int64_t qkv_at(int b, int T, int C) { return static_cast<int64_t>(b) * T * 3 * C; }
}  // namespace

// S (T,T) = Q Kᵀ.  Sᵀ = K Qᵀ.  K = op T of K' (hs,T); Q' = Qᵀ op N.  m = T, n = T, k = hs,
// A = K (lda 3C), B = Q (ldb 3C), C = S (ldc T).
GemmArgs attention_scores_gemm(float* S, const float* qkv, int b, int T, int C, int H) {
  const int hs = C / H, C3 = 3 * C;
  const float* q = qkv + qkv_at(b, T, C);
  return batched(gemm(true, false, T, T, hs, q + C, "K", C3, q, "Q", C3, S, "S", T, 1.0f, 0.0f),
                 H, hs, hs, static_cast<int64_t>(T) * T);
}

// Y (T,hs) = P V.  Yᵀ (hs,T) = Vᵀ Pᵀ = V' P', op N both.  m = hs, n = T, k = T,
// A = V (lda 3C), B = P (ldb T), C = Y (ldc C, stride hs).
GemmArgs attention_pv_gemm(float* out, const float* P, const float* qkv, int b, int T, int C,
                           int H) {
  const int hs = C / H, C3 = 3 * C;
  const float* v = qkv + qkv_at(b, T, C) + 2 * C;
  return batched(gemm(false, false, hs, T, T, v, "V", C3, P, "P", T,
                      out + static_cast<int64_t>(b) * T * C, "Y", C, 1.0f, 0.0f),
                 H, hs, static_cast<int64_t>(T) * T, hs);
}

// dP (T,T) = dY Vᵀ.  dPᵀ = V dYᵀ.  V = op T of V' (lda 3C); dY' = dYᵀ (hs,T) ld C, op N.
// m = T, n = T, k = hs, C = dP (ldc T, H blocks of T·T).
GemmArgs attention_dp_gemm(float* dP, const float* dout, const float* qkv, int b, int T, int C,
                           int H) {
  const int hs = C / H, C3 = 3 * C;
  const float* v = qkv + qkv_at(b, T, C) + 2 * C;
  return batched(gemm(true, false, T, T, hs, v, "V", C3, dout + static_cast<int64_t>(b) * T * C,
                      "dY", C, dP, "dP", T, 1.0f, 0.0f),
                 H, hs, hs, static_cast<int64_t>(T) * T);
}

// dV (T,hs) = Pᵀ dY.  dVᵀ (hs,T) = dYᵀ P.  dY' = dYᵀ op N (lda C); P = op T of P' (ldb T).
// m = hs, n = T, k = T, C = dV (ldc 3C, stride hs).
GemmArgs attention_dv_gemm(float* dqkv, const float* P, const float* dout, int b, int T, int C,
                           int H) {
  const int hs = C / H, C3 = 3 * C;
  return batched(gemm(false, true, hs, T, T, dout + static_cast<int64_t>(b) * T * C, "dY", C,
                      P, "P", T, dqkv + qkv_at(b, T, C) + 2 * C, "dV", C3,
                      1.0f, 0.0f),
                 H, hs, static_cast<int64_t>(T) * T, hs);
}

// dQ (T,hs) = dS K.  dQᵀ = Kᵀ dSᵀ = K' dS', op N both.  m = hs, n = T, k = T,
// A = K (lda 3C), B = dS (ldb T), C = dQ (ldc 3C).
GemmArgs attention_dq_gemm(float* dqkv, const float* dS, const float* qkv, int b, int T, int C,
                           int H) {
  const int hs = C / H, C3 = 3 * C;
  const int64_t o = qkv_at(b, T, C);
  return batched(gemm(false, false, hs, T, T, qkv + o + C, "K", C3, dS, "dS", T, dqkv + o, "dQ",
                      C3, 1.0f, 0.0f),
                 H, hs, static_cast<int64_t>(T) * T, hs);
}

// dK (T,hs) = dSᵀ Q.  dKᵀ = Qᵀ dS.  Q' = Qᵀ op N (lda 3C); dS = op T of dS' (ldb T).
// m = hs, n = T, k = T, C = dK (ldc 3C).
GemmArgs attention_dk_gemm(float* dqkv, const float* dS, const float* qkv, int b, int T, int C,
                           int H) {
  const int hs = C / H, C3 = 3 * C;
  const int64_t o = qkv_at(b, T, C);
  return batched(gemm(false, true, hs, T, T, qkv + o, "Q", C3, dS, "dS", T, dqkv + o + C, "dK",
                      C3, 1.0f, 0.0f),
                 H, hs, static_cast<int64_t>(T) * T, hs);
}

// Row-major C (M,N) = op(A)(M,K)·op(B)(K,N). Column-major views: C' = Cᵀ (N,M) ld ldc, and
// Cᵀ = op(B)ᵀ·op(A)ᵀ. B's buffer viewed column-major is B_storedᵀ: op(B)ᵀ is that view itself
// when trans_b is false (op N) and its transpose when true (op T); likewise A. So cuBLAS's
// (m, n, k) = (N, M, K), its A = our B (ldb, stride_b), its B = our A (lda, stride_a).
GemmArgs row_major_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                        int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                        int batch) {
  return batched(gemm(trans_b, trans_a, N, M, K, B, "B", ldb, A, "A", lda, C, "C", ldc, alpha,
                      beta),
                 batch, stride_b, stride_a, stride_c);
}

}  // namespace cuda
}  // namespace llmp
