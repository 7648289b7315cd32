// fill kernel and host <-> device Tensor copies. See fill_copy.h for what and why.
#include "kernels/cuda/fill_copy.h"

#include <algorithm>
#include <stdexcept>
#include <string>

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

void require(bool ok, const char* what, const Tensor& t, const char* expected) {
  if (!ok) throw std::invalid_argument(std::string(what) + ": expected " + expected + ", got " +
                                       t.describe());
}

}  // namespace

void fill(float* d, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;  // a launch with 0 blocks is an error
  const int blocks = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
  fill_kernel<<<blocks, kThreads, 0, stream>>>(d, n, value);
  CUDA_CHECK(cudaGetLastError());  // launch errors: bad configuration, no kernel image for this GPU
}

void fill(const Tensor& dev, float value, cudaStream_t stream) {
  require(dev.device() == Device::kCUDA && dev.dtype() == DType::kF32, "cuda::fill", dev,
          "an f32 cuda tensor");
  fill(dev.data<float>(), dev.numel(), value, stream);
}

Tensor copy_to_device(const Tensor& host) {
  require(host.defined() && host.device() == Device::kCPU, "copy_to_device", host, "a cpu tensor");
  Tensor dev = Tensor::empty(host.shape(), host.dtype(), host.category(), Device::kCUDA);
  CUDA_CHECK(cudaMemcpy(dev.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice));
  return dev;
}

Tensor copy_to_host(const Tensor& dev) {
  require(dev.defined() && dev.device() == Device::kCUDA, "copy_to_host", dev, "a cuda tensor");
  Tensor host = Tensor::empty(dev.shape(), dev.dtype(), dev.category(), Device::kCPU);
  CUDA_CHECK(cudaMemcpy(host.raw(), dev.raw(), dev.nbytes(), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace cuda
}  // namespace llmp
