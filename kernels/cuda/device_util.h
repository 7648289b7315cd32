// Device-side building blocks shared by the .cu files: warp and block reductions, the
// grid-stride loop's start and step, the launch check. nvcc, or g++ with the CPU emulator
// (device_lang.h).
//
// warp_sum/warp_max: a butterfly over the 32 lanes with __shfl_xor_sync; after 5 rounds
// (offsets 16, 8, 4, 2, 1) every lane holds the result. block_sum: each warp reduces, lane 0 of
// each warp writes its partial to shared memory, warp 0 reduces the kThreads/32 partials and
// broadcasts through shared memory (two __syncthreads).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_lang.h"
#include "kernels/cuda/launch.h"

namespace llmp {
namespace cuda {

template <typename V>
__device__ __forceinline__ V warp_sum(V x) {
  for (int o = kWarp / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, o);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
  for (int o = kWarp / 2; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
  return x;
}

/// Sum over the kThreads threads of the block; every thread gets it. All threads must call it.
template <typename V>
__device__ V block_sum(V x) {
  __shared__ V part[kThreads / kWarp];
  __shared__ V total;
  x = warp_sum(x);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = x;
  __syncthreads();
  if (threadIdx.x < kWarp) {
    V y = threadIdx.x < kThreads / kWarp ? part[threadIdx.x] : V(0);
    y = warp_sum(y);
    if (threadIdx.x == 0) total = y;
  }
  __syncthreads();
  return total;
}

/// Max over the block; every thread gets it. All threads must call it.
__device__ inline float block_max(float x) {
  __shared__ float part[kThreads / kWarp];
  __shared__ float total;
  x = warp_max(x);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = x;
  __syncthreads();
  if (threadIdx.x < kWarp) {
    float y = threadIdx.x < kThreads / kWarp ? part[threadIdx.x] : -INFINITY;
    y = warp_max(y);
    if (threadIdx.x == 0) total = y;
  }
  __syncthreads();
  return total;
}

/// First index and step of a grid-stride loop (64-bit: buffers of 2^31 floats exist).
__device__ __forceinline__ int64_t gs_begin() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t gs_step() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace cuda
}  // namespace llmp

/// After every <<<...>>>: launch errors (bad configuration, no kernel image for this GPU).
#define LLMP_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())
