// The fill kernel: every element of a device buffer set to one value. See fill_kernel.h.
#include "kernels/cuda/fill_kernel.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace llmp {
namespace cuda {
namespace {

constexpr int kThreads = 256;         // threads per block: 8 warps
constexpr int64_t kMaxBlocks = 4096;  // 2^20 threads, ~4x what an H100 holds (132 SMs x 2048)

// Grid-stride loop: thread t handles t, t + G, t + 2G, ... (G = total threads in the grid).
// 64-bit indices: a 2^31-element buffer (8 GiB of floats) is not unusual on an 80 GiB GPU.
__global__ void fill_kernel(float* __restrict__ d, int64_t n, float value) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    d[i] = value;
}

}  // namespace

void fill(float* d, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;  // a launch with 0 blocks is an error
  const int blocks = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
  fill_kernel<<<blocks, kThreads, 0, stream>>>(d, n, value);
  CUDA_CHECK(cudaGetLastError());  // launch errors: bad configuration, no kernel image for this GPU
}

}  // namespace cuda
}  // namespace llmp
