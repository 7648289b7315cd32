// Helpers of the GPU twin tests: their fixture (skipped without a GPU), device buffers that copy
// themselves back; the random inputs and the relative difference each test prints and bounds are
// twin_compare.h's. Test-only.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/twin_compare.h"

namespace llmp {
namespace test {

/// The fixture of every GPU twin test: on a machine without a CUDA device the test is SKIPPED
/// with the runtime's reason ("[  SKIPPED ]" in test.log, result="skipped" in test.xml); with
/// one, TF32 is off (the twin bounds assume fp32 products; TwinTf32IsOptIn checks the switch).
/// A suite names it (using KernelsTwin = test::GpuTwin) or derives from it for members.
class GpuTwin : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
    cuda::set_tf32(false);
  }
};

/// A device copy of a host vector (or n uninitialised elements); get() copies it back.
template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    CUDA_CHECK(cudaMalloc(&p, sizeof(T) * std::max<size_t>(n, 1)));
  }
  explicit Dev(const std::vector<T>& h) : Dev(h.size()) {
    CUDA_CHECK(cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice));
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> get() const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost));
    return h;
  }
};
using DevF = Dev<float>;

/// n elements of device memory at p (a device tensor's raw(), say), copied to the host.
template <typename T = float>
std::vector<T> from_device(const void* p, size_t n) {
  std::vector<T> h(n);
  CUDA_CHECK(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace test
}  // namespace llmp
