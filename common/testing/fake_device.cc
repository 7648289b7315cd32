// FakeDevice: host memory standing in for a GPU's. See the header.
#include "common/testing/fake_device.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace llmp {
namespace testing {

FakeDevice::FakeDevice() {
  try {
    previous_ = &allocator_for(Device::kCUDA);
  } catch (const std::runtime_error&) {
    previous_ = nullptr;  // none registered (a build without CUDA)
  }
  register_allocator(Device::kCUDA, this);
}

FakeDevice::~FakeDevice() { register_allocator(Device::kCUDA, previous_); }

void* FakeDevice::allocate(int64_t bytes) {
  void* p = std::malloc(static_cast<size_t>(bytes > 0 ? bytes : 1));
  if (!p) throw std::bad_alloc();
  in_use_ += bytes;
  return p;
}

void FakeDevice::deallocate(void* p, int64_t bytes) {
  std::free(p);
  in_use_ -= bytes;
}

void FakeDevice::copy(void* dst, Device dst_device, const void* src, Device src_device,
                      int64_t bytes) {
  if (src_device == Device::kCPU && dst_device == Device::kCUDA) h2d_ += bytes;
  if (src_device == Device::kCUDA && dst_device == Device::kCPU) d2h_ += bytes;
  if (src_device == Device::kCUDA && dst_device == Device::kCUDA) d2d_ += bytes;
  std::memmove(dst, src, static_cast<size_t>(bytes));
}

}  // namespace testing
}  // namespace llmp
