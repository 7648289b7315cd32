// Ring self-attention's kernels (ring_self_block.h): cuBLAS for the products; the causal softmax
// by global position and its backward are attention.cu's warp-per-row kernels with g0 = r·Tl.
#include "kernels/cuda/ring_self_block.h"

#include "kernels/cuda/attention.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/gemm_args.h"

namespace llmp {
namespace cuda {
void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                          const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                          int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                          int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  run_gemm(row_major_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b,
                          beta, C, ldc, stride_c, batch));
}

void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0) {
  causal_softmax(s, rows, Tl, T, g0, 1.0f);  // the scores are scaled already (alpha = 1/√hs)
}

void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl, int T, int g0,
                                  float scale) {
  causal_softmax_backward(dp, P, rows, Tl, T, g0, scale);
}

}  // namespace cuda
}  // namespace llmp
