// The kernels of ring self-attention (common/cp/ring_self_attention.h): the block products of
// its four rings as ONE strided-batched matrix product, and the causal softmax of whole score
// rows by global position with its backward.
//
// Paper: Li et al. 2021, "Sequence Parallelism: Long Sequence Training from System
// Perspective", §3.1 (Figure 2): rank r holds the Tl = T/p query rows [r·Tl, (r+1)·Tl) and sees
// every key and value chunk once as the chunks travel a ring. Per sequence b and chunk c, over
// the H heads at once (head stride hs along the channels; Q, K_c, V_c, dO are (Tl,hs) strided
// views, S_c, P_c, dP_c, dS_c the (Tl,Tl) block c of a (B,H,Tl,T) score tensor):
//
//   forward    S_c  = Q K_cᵀ/√hs          gemm_strided_batched(N, T, alpha 1/√hs, beta 0)
//              P    = causal softmax by global position (causal_softmax_rows)
//              Y   += P_c V_c              (N, N, beta 1)
//   backward   dV_a += P_aᵀ dO             (T, N, beta 1)
//              dP_c = dO V_cᵀ              (N, T, beta 0)
//              dS   = P ⊙ (dP − rowsum(P ⊙ dP))/√hs  (causal_softmax_rows_backward)
//              dK_a += dS_aᵀ Q             (T, N, beta 1)
//              dQ  += dS_c K_c             (N, N, beta 1)
//
// Why one general product rather than six named ones (as kernels/cuda/gemm_args.h names
// attention's): the six differ only in transposes, alpha, beta and strides, which is exactly
// cublasSgemmStridedBatched's signature; the core states each call's shapes next to it. The
// diagonal block c = r is multiplied as a full square like the others: above its diagonal P and
// dS are exactly 0 (the softmax writes 0 there), so the products are the same numbers as on the
// triangle, and one path serves both devices (cuBLAS has no strided-batched triangular product).
//
// FLOPs (flops.h): 2·M·N·K per batch entry, counted by gemm_strided_batched as it runs; the
// softmaxes are element-wise and not counted.
//
// Glossary: B sequences, H heads, hs head size, T positions, Tl = T/p rows of this rank,
// g0 = r·Tl the global position of its first row, ld a row stride in floats, M,N,K the product's
// dimensions (op(A) (M,K), op(B) (K,N), C (M,N)).
#pragma once

#include <cstdint>

namespace llmp {
namespace cpu {

/// Row-major strided-batched product: for i in [0, batch),
///   C_i (M,N) = alpha·op(A_i)·op(B_i) + beta·C_i,   X_i = X + i·stride_x,
/// op(A) = A stored (M,K) row stride lda (trans_a false) or Aᵀ with A stored (K,M) (true);
/// likewise B ((K,N) or stored (N,K)). beta = 0 overwrites C without reading it (as cuBLAS).
/// All pointers are f32 row-major with the given row strides (lda, ldb, ldc ≥ the stored
/// columns). Counts 2·M·N·K·batch FLOPs (flops.h). The shape of cublasSgemmStridedBatched.
void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                          const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                          int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                          int batch);

/// In place over `rows` score rows of length T (row k at s + k·T; rows = B·H·Tl, row k is local
/// row i = k mod Tl, global position g = g0 + i): the keys j ≤ g get
///   P[j] = exp(S[j] − max_{j'≤g} S[j']) / Σ_{j'≤g} exp(S[j'] − max),
/// the tail j > g exactly 0 (whatever it held: the never-computed chunks c > r). g0 + Tl ≤ T.
void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0);

/// The softmax's backward in place over dP (same rows as causal_softmax_rows, P its result):
///   dS[j] = scale·P[j]·(dP[j] − Σ_{j'≤g} P[j']·dP[j'])  for j ≤ g,  0 for j > g
/// (scale = 1/√hs folds the scores' scaling into dS, so dQ = dS K and dK = dSᵀ Q need none).
void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl, int T, int g0,
                                  float scale);

}  // namespace cpu
}  // namespace llmp
