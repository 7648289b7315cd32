// Lab softmax_kernel, reference solution (for instructors; students start from ../starter.cu).
//
// One thread block per row, kThreads threads striding over its C elements. Three passes over
// the row: the max (each thread over its elements, then the block), the exponentials written to
// y and their sum (the same), then y scaled by 1/s. A block-wide reduction is two levels: the 32
// lanes of each warp combine by shuffles (__shfl_xor_sync: every lane ends with the warp's
// result), lane 0 of each warp leaves it in shared memory, and after a barrier every thread
// combines the kWarps results, in the same order, so every thread holds the same bits.
//
// Glossary: N rows, C row length, m row max, s row sum, lane = threadIdx.x % 32.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_lang.h"
#include "labs/softmax_kernel/softmax_kernel.h"

namespace llmp::lab {
namespace {

constexpr int kThreads = 128;  // threads per block, one block per row
constexpr int kWarps = kThreads / 32;

// max (kMax) or sum of one value per thread over the block; `partial` holds kWarps floats of
// shared memory, free again when it returns.
template <bool kMax>
__device__ float block_reduce(float v, float* partial) {
  for (int offset = 16; offset > 0; offset /= 2) {  // butterfly: lane i meets lane i ^ offset
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();  // every warp's result written before any thread reads them
  float r = partial[0];
  for (int w = 1; w < kWarps; ++w) r = kMax ? fmaxf(r, partial[w]) : r + partial[w];
  __syncthreads();  // every thread has read them before the next reduction writes partial again
  return r;
}

__global__ void __launch_bounds__(kThreads) softmax_rows_kernel(const float* __restrict__ x,
                                                                 float* __restrict__ y, int C) {
  __shared__ float partial[kWarps];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * C;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * C;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < C; c += kThreads) m = fmaxf(m, xr[c]);
  m = block_reduce<true>(m, partial);  // finite: the row has a finite element
  float s = 0.0f;
  for (int c = threadIdx.x; c < C; c += kThreads) {
    const float e = expf(xr[c] - m);  // ≤ 1; exactly 0 for −inf
    yr[c] = e;
    s += e;
  }
  s = block_reduce<false>(s, partial);  // ≥ 1: the max's own term is exp(0)
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < C; c += kThreads) yr[c] *= inv;
}

}  // namespace

void softmax_rows(const float* x, float* y, int N, int C, cudaStream_t stream) {
  const auto bad = [](const char* name, int v, const char* want) {
    return std::invalid_argument("softmax_rows: " + std::string(name) + " = " +
                                 std::to_string(v) + " (want " + want + ")");
  };
  if (N < 0) throw bad("N", N, "N >= 0");
  if (C < 1) throw bad("C", C, "C >= 1");
  if (N == 0) return;  // a grid of 0 blocks is a launch error
  softmax_rows_kernel<<<N, kThreads, 0, stream>>>(x, y, C);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace llmp::lab
