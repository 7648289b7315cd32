// fill kernel and host <-> device Tensor copies. See fill_copy.h for what and why.
#include "kernels/cuda/fill_copy.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"

namespace llmp {
namespace cuda {
namespace {

void require(bool ok, const char* what, const Tensor& t, const char* expected) {
  if (!ok) throw std::invalid_argument(std::string(what) + ": expected " + expected + ", got " +
                                       t.describe());
}

}  // namespace

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
