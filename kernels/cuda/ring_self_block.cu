// Ring self-attention's kernels (ring_self_block.h): cuBLAS for the products, a warp per score
// row for the causal softmax by global position and its backward.
#include "kernels/cuda/ring_self_block.h"

#include <cmath>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/gemm_args.h"

namespace llmp {
namespace cuda {
namespace {

/// The last live key of row r: its global position g = g0 + (r mod Tl).
__device__ __forceinline__ int live_end(int64_t r, int Tl, int g0) {
  return g0 + static_cast<int>(r % Tl);
}

// Row r in place: P_j = exp(S_j − max_{j'≤g} S_j') / Σ_{j'≤g} exp(...) for j ≤ g, 0 beyond.
__global__ void causal_softmax_rows_kernel(float* s, int64_t rows, int Tl, int T, int g0) {
  const int64_t r = warp_row(blockIdx.x, threadIdx.x);
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp, g = live_end(r, Tl, g0);
  float* row = s + r * T;
  float mx = -INFINITY;
  for (int j = lane; j <= g; j += kWarp) mx = fmaxf(mx, row[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j <= g; j += kWarp) {
    const float e = expf(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j < T; j += kWarp) row[j] = j <= g ? row[j] * inv : 0.0f;
}

// Row r in place over dP: dS_j = scale·P_j·(dP_j − Σ_{j'≤g} P_j' dP_j') for j ≤ g, 0 beyond.
__global__ void causal_softmax_rows_backward_kernel(float* dp, const float* P, int64_t rows,
                                                    int Tl, int T, int g0, float scale) {
  const int64_t r = warp_row(blockIdx.x, threadIdx.x);
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp, g = live_end(r, Tl, g0);
  float* d = dp + r * T;
  const float* p = P + r * T;
  float dot = 0.0f;
  for (int j = lane; j <= g; j += kWarp) dot += p[j] * d[j];
  dot = warp_sum(dot);
  for (int j = lane; j < T; j += kWarp) d[j] = j <= g ? scale * p[j] * (d[j] - dot) : 0.0f;
}

}  // namespace

void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                          const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                          int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                          int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  run_gemm(row_major_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b,
                          beta, C, ldc, stride_c, batch));
}

void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0) {
  if (rows <= 0) return;
  causal_softmax_rows_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(s, rows, Tl,
                                                                                    T, g0);
  LLMP_LAUNCH_CHECK();
}

void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl, int T, int g0,
                                  float scale) {
  if (rows <= 0) return;
  causal_softmax_rows_backward_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(
      dp, P, rows, Tl, T, g0, scale);
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
