// FakeDevice: Device::kCUDA tensors in host memory, for testing device code paths without a GPU.
//
// The code that decides *where* data goes (a Tensor copy across devices, a process group staging
// a device tensor through a host buffer, the ops layer picking a device's kernels) is the same
// whether the device is real or not. A FakeDevice registers itself as the allocator of
// Device::kCUDA: allocations are host memory, so a test on a machine without a GPU can run that
// code and check the data arrives, and it counts every copy by direction, so a test can check
// how many bytes crossed between "host" and "device". Real kernels never see these tensors (a
// test binary with a FakeDevice does not link kernels/cuda); the real allocator is
// kernels/cuda/device_allocator.
//
//   FakeDevice dev;                                 // registered for Device::kCUDA until destroyed
//   Tensor d = Tensor::zeros({4}, DType::kF32, MemCategory::kOther, Device::kCUDA);
//   d.copy_from(host);                              // dev.h2d_bytes() == 16
#pragma once

#include <cstdint>

#include "common/tensor/tensor.h"

namespace llmp {
namespace testing {

class FakeDevice : public Allocator {
 public:
  /// Registers this allocator for Device::kCUDA, replacing the one there (restored on destruction).
  FakeDevice();
  ~FakeDevice() override;
  FakeDevice(const FakeDevice&) = delete;
  FakeDevice& operator=(const FakeDevice&) = delete;

  void* allocate(int64_t bytes) override;
  void deallocate(void* p, int64_t bytes) override;
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            int64_t bytes) override;

  /// Bytes copied host -> device, device -> host and device -> device since construction.
  int64_t h2d_bytes() const { return h2d_; }
  int64_t d2h_bytes() const { return d2h_; }
  int64_t d2d_bytes() const { return d2d_; }
  /// Device bytes currently allocated.
  int64_t in_use() const { return in_use_; }

 private:
  Allocator* previous_ = nullptr;
  int64_t h2d_ = 0, d2h_ = 0, d2d_ = 0, in_use_ = 0;
};

}  // namespace testing
}  // namespace llmp
