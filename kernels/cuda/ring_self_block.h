// Ring self-attention's kernels on the GPU: the twins of kernels/cpu/ring_self_block.h (same
// signatures, layouts and math; read that header first).
//
//   gemm_strided_batched           one cublasSgemm(StridedBatched) call (gemm_args.h
//                                  row_major_gemm: the row-major product as its column-major
//                                  transpose), on stream(), with the TF32 switch of context.h as
//                                  every product of kernels/cuda
//   causal_softmax_rows            ONE WARP PER ROW (launch.h warp_per_row_blocks over the rows):
//                                  lanes over the keys j ≤ g = g0 + (row mod Tl) for the max,
//                                  then exp and the sum (warp_max / warp_sum butterflies), then
//                                  P_j = e_j / Σ for j ≤ g and exactly 0 for j > g
//   causal_softmax_rows_backward   one warp per row: dot = Σ_{j≤g} P_j dP_j (warp_sum), then
//                                  dS_j = scale·P_j·(dP_j − dot) for j ≤ g, 0 beyond
//
// The row kernels are attention.cu's causal softmax with the row's live length g + 1 taken
// from its GLOBAL position (this rank's rows start at g0 = r·Tl) instead of its index in a
// whole sequence, and the scale applied by the product (alpha = 1/√hs) rather than here.
//
// Glossary: as kernels/cpu/ring_self_block.h. Device pointers, on stream() (context.h).
#pragma once

#include <cstdint>

namespace llmp {
namespace cuda {

void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                          const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                          int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                          int batch);
void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0);
void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl, int T, int g0,
                                  float scale);

}  // namespace cuda
}  // namespace llmp
