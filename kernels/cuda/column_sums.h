// Column sums of an (N, C) row-major array, the reduction behind every bias and LayerNorm weight
// gradient (db = Σ_rows dy, dw = Σ_rows dy·x̂): two passes, deterministic, nvcc only.
//
// The naive kernel (one thread per column, looping over the rows) has C threads: for GPT-2's
// C = 768 that is 3 blocks on a GPU of 132 multiprocessors, and each thread walks 8192 rows
// one dependent load at a time. Measured on an H100 (README "On a GPU"): the LayerNorm weight and
// bias gradients took 43% of a gpt2 step's kernel time that way (92 of 213 ms). Here the rows are
// cut into S slices:
//
//   pass 1: block (column tile j, slice s): 32 columns × 8 row lanes (kThreads = 256); lane
//           (ty, tx) sums rows ty, ty+8, ... of the slice in column 32j + tx (a warp reads 32
//           consecutive floats of one row: one 128-byte transaction), then the 8 row lanes are
//           added in ty order through shared memory: partial[k][s][c];
//   pass 2: thread c adds its S partials in s order: out_k[c] += Σ_s partial[k][s][c].
//
// Every sum is taken in a fixed order, so a result is the same bit for bit from run to run
// (another order than the CPU twin's rows-in-order loop: the twin tests' row-sum bound, 1e-5).
// S = ceil(N / 64), at most kMaxColumnSlices (then more rows per slice); the partials go in the
// context's workspace (context.h), K·S·C floats. All on stream(), asynchronous.
//
// Term: a device functor, term(n, c, v) writes the K terms of row n, column c into v[0..K).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"

namespace llmp {
namespace cuda {

constexpr int kColumnSliceRows = 64;    ///< rows per slice of pass 1 (fewer slices past the cap)
constexpr int kMaxColumnSlices = 1024;  ///< pass 2 adds at most this many partials per column

/// The K outputs of a column sum; a nullptr output is skipped.
template <int K>
struct ColumnOutputs {
  float* p[K];
};

template <int K, typename Term>
__global__ void column_partials_kernel(float* __restrict__ part, Term term, int64_t N, int C,
                                       int64_t rows_per_slice) {
  constexpr int kLanes = kThreads / kWarp;  // row lanes per block
  const int tx = threadIdx.x % kWarp, ty = threadIdx.x / kWarp;
  const int c = blockIdx.x * kWarp + tx, s = blockIdx.y, S = gridDim.y;
  const int64_t r0 = s * rows_per_slice, r1 = r0 + rows_per_slice < N ? r0 + rows_per_slice : N;
  float acc[K];
  for (int k = 0; k < K; ++k) acc[k] = 0.0f;
  if (c < C) {
    for (int64_t n = r0 + ty; n < r1; n += kLanes) {
      float v[K];
      term(n, c, v);
      for (int k = 0; k < K; ++k) acc[k] += v[k];
    }
  }
  __shared__ float lanes[K][kLanes][kWarp];
  for (int k = 0; k < K; ++k) lanes[k][ty][tx] = acc[k];
  __syncthreads();
  if (ty == 0 && c < C) {
    for (int k = 0; k < K; ++k) {
      float sum = 0.0f;
      for (int j = 0; j < kLanes; ++j) sum += lanes[k][j][tx];
      part[(static_cast<int64_t>(k) * S + s) * C + c] = sum;
    }
  }
}

template <int K>
__global__ void column_finish_kernel(ColumnOutputs<K> out, const float* __restrict__ part, int S,
                                     int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int k = 0; k < K; ++k) {
    if (!out.p[k]) continue;
    float sum = 0.0f;
    for (int s = 0; s < S; ++s) sum += part[(static_cast<int64_t>(k) * S + s) * C + c];
    out.p[k][c] += sum;
  }
}

/// out.p[k][c] += Σ_{n<N} term_k(n, c) for c < C (the file comment's two passes).
template <int K, typename Term>
void column_sums(ColumnOutputs<K> out, Term term, int64_t N, int C) {
  if (N <= 0 || C <= 0) return;
  const int64_t slices =
      std::min<int64_t>((N + kColumnSliceRows - 1) / kColumnSliceRows, kMaxColumnSlices);
  const int64_t rows_per_slice = (N + slices - 1) / slices;
  const int S = static_cast<int>((N + rows_per_slice - 1) / rows_per_slice);  // no empty slice
  float* part = static_cast<float*>(workspace(sizeof(float) * K * S * static_cast<size_t>(C)));
  const dim3 grid((C + kWarp - 1) / kWarp, S);
  column_partials_kernel<K><<<grid, kThreads, 0, stream()>>>(part, term, N, C, rows_per_slice);
  LLMP_LAUNCH_CHECK();
  column_finish_kernel<K><<<column_blocks(C), kThreads, 0, stream()>>>(out, part, S, C);
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
