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
//
// Guarded (FakeDevice dev(/*guarded=*/true)): every allocation gets pages of its own (mmap) that
// are unreadable (mprotect PROT_NONE) except while a "device operation" runs: one of this
// allocator's set_zero / fill_f32 / copy, or a kernel of FakeKernelOps (fake_kernel_ops.h), which
// opens the memory with an Access scope. Host code that reads or writes device memory outside
// them, the bug a GPU port makes (a device pointer dereferenced on the host), then dies with
// SIGSEGV at the faulting line instead of passing silently, as it would on the host-memory
// stand-in and crash only on a real GPU.
#pragma once

#include <cstdint>
#include <map>

#include "common/tensor/tensor.h"

namespace llmp {
namespace testing {

class FakeDevice : public Allocator {
 public:
  /// Registers this allocator for Device::kCUDA, replacing the one there (restored on
  /// destruction). `guarded`: device memory unreadable outside device operations (above).
  explicit FakeDevice(bool guarded = false);
  ~FakeDevice() override;
  FakeDevice(const FakeDevice&) = delete;
  FakeDevice& operator=(const FakeDevice&) = delete;

  void* allocate(int64_t bytes) override;
  void deallocate(void* p, int64_t bytes) override;
  void set_zero(void* p, int64_t bytes) override;
  void fill_f32(float* p, int64_t n, float value) override;
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            int64_t bytes) override;

  /// While alive, the guarded device memory is readable and writable (a device operation runs).
  /// Nests; does nothing for an unguarded FakeDevice.
  class Access {
   public:
    explicit Access(FakeDevice& d);
    ~Access();
    Access(const Access&) = delete;
    Access& operator=(const Access&) = delete;

   private:
    FakeDevice& d_;
  };
  bool guarded() const { return guarded_; }
  /// Whether [p, p + bytes) lies inside one live allocation of this device.
  bool owns(const void* p, int64_t bytes = 1) const;
  /// Device operations run so far (Access scopes opened at the outermost level).
  int64_t operations() const { return operations_; }

  /// Bytes copied host -> device, device -> host and device -> device since construction.
  int64_t h2d_bytes() const { return h2d_; }
  int64_t d2h_bytes() const { return d2h_; }
  int64_t d2d_bytes() const { return d2d_; }
  /// Device bytes currently allocated.
  int64_t in_use() const { return in_use_; }

 private:
  void protect_all(int prot);
  Allocator* previous_ = nullptr;
  bool guarded_ = false;
  int open_ = 0;                              // nesting depth of Access scopes
  std::map<void*, int64_t> pages_;            // live allocations: start -> bytes (mapped, if guarded)
  int64_t h2d_ = 0, d2h_ = 0, d2d_ = 0, in_use_ = 0, operations_ = 0;
};

}  // namespace testing
}  // namespace llmp
