// CUDA allocator for Tensor: cudaMalloc / cudaFree behind the Allocator interface. See the header.
#include "kernels/cuda/device_allocator.h"

#include <cuda_runtime.h>

#include "common/tensor/tensor.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fill_kernel.h"

namespace llmp {
namespace {

class CudaAllocator : public Allocator {
 public:
  void* allocate(int64_t bytes) override {
    void* p = nullptr;
    // cudaMalloc aligns to at least 256 bytes; 0 bytes gives nullptr, which cudaFree accepts.
    CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(bytes)));
    in_use_ += bytes;
    return p;
  }
  void deallocate(void* p, int64_t bytes) override {
    CUDA_CHECK(cudaFree(p));
    in_use_ -= bytes;
  }
  // Tensor::zeros, fill and copy_from on CUDA tensors. Synchronous, as the host's are: a cudaMemset
  // or a kernel on the default stream, then a device synchronise; cudaMemcpy is synchronous for
  // pageable host memory and device-to-device copies are ordered on the default stream.
  void set_zero(void* p, int64_t bytes) override {
    CUDA_CHECK(cudaMemset(p, 0, static_cast<size_t>(bytes)));
  }
  void fill_f32(float* p, int64_t n, float value) override {
    cuda::fill(p, n, value);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  // cudaMemcpyDefault: the direction comes from the pointers (unified virtual addressing, every
  // 64-bit CUDA platform), so one call serves host->device, device->host and device->device.
  void copy(void* dst, Device, const void* src, Device, int64_t bytes) override {
    CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault));
  }
  int64_t in_use() const { return in_use_; }

 private:
  int64_t in_use_ = 0;
};

CudaAllocator& the_allocator() {
  // Never destroyed: a Tensor freed during static destruction may still need it.
  static CudaAllocator* a = new CudaAllocator;
  return *a;
}

// Registers the allocator when this object file is linked in (BUILD: alwayslink = 1).
[[maybe_unused]] const bool registered = (register_cuda_allocator(), true);

}  // namespace

void register_cuda_allocator() { register_allocator(Device::kCUDA, &the_allocator()); }

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();  // the answer is returned, not left as the last error (sticky w/o driver)
  if (err != cudaSuccess) {
    if (why)
      *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
             cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why) *why = "cudaGetDeviceCount returned 0 devices";
    return false;
  }
  if (why) *why = std::to_string(count) + " CUDA device(s)";
  return true;
}

int64_t cuda_bytes_in_use() { return the_allocator().in_use(); }

}  // namespace llmp
