// Helpers of kernels_twin_test: random inputs, device buffers that copy themselves back, and the
// relative difference each test prints and bounds. Test-only.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace llmp {
namespace test {

using Vec = std::vector<float>;

inline Vec rnd(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (float& x : v) x = u(g);
  return v;
}

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

/// max_i |got_i - ref_i| / max(1, max_i |ref_i|), printed under `what`.
inline float rel_err(const Vec& got, const Vec& ref, const char* what) {
  EXPECT_EQ(got.size(), ref.size()) << what;
  float d = 0.0f, s = 1.0f;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    d = std::max(d, std::fabs(got[i] - ref[i]));
    s = std::max(s, std::fabs(ref[i]));
  }
  std::printf("%-28s relative difference %.3g\n", what, d / s);
  return d / s;
}

}  // namespace test
}  // namespace llmp
