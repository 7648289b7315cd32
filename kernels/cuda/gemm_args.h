// The cuBLAS calls of matmul.cu and attention.cu, as plain host data (GemmArgs).
//
// cuBLAS is column-major (Fortran): a matrix M (r,c) with leading dimension ld has M(i,j) at
// M[i + j·ld]. Our buffers are row-major: a row-major (r,c) buffer with row stride ld IS the
// column-major (c,r) matrix Mᵀ with the same ld, without moving a byte. So a row-major product
// C = A·B (C (m',n')) is computed as its transpose Cᵀ = Bᵀ·Aᵀ: the column-major cuBLAS call sees
// Bᵀ and Aᵀ, which are exactly our row-major B and A reinterpreted. Each function below derives
// its call from that identity in a comment; gemm_args_test then evaluates the returned arguments
// with a host emulation of cublasSgemmStridedBatched's column-major semantics and compares with
// kernels/cpu, so a wrong ld, m/n/k or transpose flag fails on a machine without a GPU.
//
// cublasSgemmStridedBatched(handle, transa, transb, m, n, k, α, A, lda, strideA, B, ldb, strideB,
//                           β, C, ldc, strideC, batch):
//   for i in [0, batch):  C_i (m,n) = α·op(A_i)(m,k)·op(B_i)(k,n) + β·C_i,  X_i = X + i·strideX,
//   op(A) = A (lda ≥ m) or Aᵀ (A stored (k,m), lda ≥ k), likewise for B.
//
// Glossary: N rows (B·T), C in features, OC out features, T sequence, H heads, hs = C/H,
// B batch; qkv (B,T,3C), att (B,H,T,T), out (B,T,C) as kernels/cpu/attention.h.
#pragma once

#include <cstdint>

namespace llmp {
namespace cuda {

/// One cublasSgemm(StridedBatched) call, pointers included (device pointers in the kernels,
/// host pointers in the test: the offsets are the same arithmetic).
struct GemmArgs {
  bool transa = false, transb = false;  ///< CUBLAS_OP_T when true, CUBLAS_OP_N otherwise
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0;  ///< elements between batch entries
  int batch = 1;                                  ///< 1: a plain cublasSgemm
  float alpha = 1.0f, beta = 0.0f;
  const float* A = nullptr;
  const float* B = nullptr;
  float* C = nullptr;
  const char* a_name = "";  ///< which of our buffers is A, B, C (for messages)
  const char* b_name = "";
  const char* c_name = "";
};

/// The elements of its buffer an operand of a product reads: [X, X + extent). op(X) is
/// (rows, cols) column-major: stored as is (trans false) its last column starts at ld·(cols-1),
/// so ld·(cols-1) + rows; transposed (trans true: X stored (cols, rows)) ld·(rows-1) + cols.
/// 0 for an empty matrix.
int64_t operand_extent(bool trans, int rows, int cols, int ld);
/// A's extent in g, over every batch entry: operand_extent(transa, m, k, lda) + (batch-1)·strideA.
int64_t a_extent(const GemmArgs& g);
/// B's: operand_extent(transb, k, n, ldb) + (batch-1)·strideB.
int64_t b_extent(const GemmArgs& g);

// ---- matmul.h (y = x W + b and the tied head y = x Wtᵀ) ---------------------------------------

/// y (N,OC) = x (N,C) @ W (C,OC); beta 1 when y already holds the broadcast bias.
GemmArgs matmul_forward_gemm(float* y, const float* x, const float* W, int N, int C, int OC,
                             float beta);
/// dx (N,C) = dy (N,OC) @ Wᵀ, overwritten.
GemmArgs matmul_backward_input_gemm(float* dx, const float* dy, const float* W, int N, int C,
                                    int OC);
/// dW (C,OC) += xᵀ @ dy, accumulated.
GemmArgs matmul_backward_weight_gemm(float* dW, const float* dy, const float* x, int N, int C,
                                     int OC);
/// y (N,OC) = x (N,C) @ Wtᵀ, Wt (OC,C).
GemmArgs matmul_nt_forward_gemm(float* y, const float* x, const float* Wt, int N, int C, int OC);
/// dx (N,C) = dy (N,OC) @ Wt (OC,C), overwritten.
GemmArgs matmul_nt_backward_input_gemm(float* dx, const float* dy, const float* Wt, int N, int C,
                                       int OC);
/// dWt (OC,C) += dyᵀ @ x, accumulated.
GemmArgs matmul_nt_backward_weight_gemm(float* dWt, const float* dy, const float* x, int N, int C,
                                        int OC);

// ---- attention.h: batch b, batched over the H heads (stride hs along qkv's channels) ----------
// Each product's (T,T) operand or result is one batch entry's (H,T,T) block: S, P, dP or dS of
// entry b alone (att + b·H·T·T of the kept P, or a workspace the size of one entry).

/// S (H,T,T) of batch b = Q Kᵀ (unscaled: the softmax applies 1/√hs), into S.
GemmArgs attention_scores_gemm(float* S, const float* qkv, int b, int T, int C, int H);
/// Y = P V (T,hs) per head, P (H,T,T) of batch b, into out's block of b (row stride C).
GemmArgs attention_pv_gemm(float* out, const float* P, const float* qkv, int b, int T, int C,
                           int H);
/// dP (H,T,T) = dY Vᵀ per head, into dP (H·T·T floats, batch b's heads).
GemmArgs attention_dp_gemm(float* dP, const float* dout, const float* qkv, int b, int T, int C,
                           int H);
/// dV = Pᵀ dY (T,hs) per head, P (H,T,T) of batch b, into dqkv's v channels of b (overwritten).
GemmArgs attention_dv_gemm(float* dqkv, const float* P, const float* dout, int b, int T, int C,
                           int H);
/// dQ = dS K (T,hs) per head, dS (H,T,T), into dqkv's q channels of batch b (overwritten).
GemmArgs attention_dq_gemm(float* dqkv, const float* dS, const float* qkv, int b, int T, int C,
                           int H);
/// dK = dSᵀ Q (T,hs) per head, into dqkv's k channels of batch b (overwritten).
GemmArgs attention_dk_gemm(float* dqkv, const float* dS, const float* qkv, int b, int T, int C,
                           int H);

/// Where p's element lives in a 16-bit twin of an fp32 buffer: `twin` holds the buffer starting
/// at `base` element for element in 2 bytes each (a noted source, a rounded copy, or the 16-bit P
/// the softmax wrote where `base` is the workspace the product was laid out on); p points into
/// [base, ...). The 16-bit products (run_gemm_16bit) read g.A's and g.B's twins at these.
inline const void* twin_at(const void* twin, const float* base, const float* p) {
  return static_cast<const uint16_t*>(twin) + (p - base);
}
/// The same for a 16-bit twin a product writes (a 16-bit C: run_gemm_16bit's C16).
inline void* twin_at(void* twin, const float* base, const float* p) {
  return static_cast<uint16_t*>(twin) + (p - base);
}

// ---- ring_self_block.h: any row-major strided-batched product ---------------------------------

/// C_i (M,N) = alpha·op(A_i)·op(B_i) + beta·C_i, i < batch, every buffer row-major (the
/// arguments of kernels/cpu/ring_self_block.h's gemm_strided_batched) as one column-major call:
/// Cᵀ = op(B)ᵀ·op(A)ᵀ, so cuBLAS's A is our B (op T iff trans_b), its B our A (op T iff
/// trans_a), m = N, n = M, k = K, the leading dimensions and batch strides travel with their
/// buffers.
GemmArgs row_major_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                        int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                        int batch);

}  // namespace cuda
}  // namespace llmp
