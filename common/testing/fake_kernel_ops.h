// FakeKernelOps: kernels/cpu registered as the Device::kCUDA kernels, over a FakeDevice's memory.
//
// With a FakeDevice (fake_device.h) the model can be placed "on the GPU" on a machine without
// one: GPT::with_device(Device::kCUDA) then allocates its activations on the FakeDevice and calls
// kernel_ops(Device::kCUDA), which is this table: the CPU kernels, each run inside a
// FakeDevice::Access scope. A guarded FakeDevice thus checks that the device walk touches device
// memory only through kernels and the allocator's operations, and the results, computed by the
// same kernels, must equal the CPU walk's bit for bit. What it cannot check is the CUDA kernels
// themselves (kernels/cuda, tested against these CPU twins on a GPU).
#pragma once

#include <memory>

#include "common/testing/fake_device.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace testing {

class FakeKernelOps {
 public:
  /// Registers the table for Device::kCUDA (the previous one is restored on destruction).
  /// `dev` must outlive this object.
  explicit FakeKernelOps(FakeDevice& dev);
  ~FakeKernelOps();
  FakeKernelOps(const FakeKernelOps&) = delete;
  FakeKernelOps& operator=(const FakeKernelOps&) = delete;

 private:
  std::unique_ptr<KernelOps> table_;
  KernelOps* previous_ = nullptr;
};

}  // namespace testing
}  // namespace llmp
