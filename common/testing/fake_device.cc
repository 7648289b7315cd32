// FakeDevice: host memory standing in for a GPU's. See the header.
#include "common/testing/fake_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace llmp {
namespace testing {
namespace {

int64_t page_rounded(int64_t bytes) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  return ((bytes > 0 ? bytes : 1) + page - 1) / page * page;
}

}  // namespace

FakeDevice::FakeDevice(bool guarded) : guarded_(guarded) {
  try {
    previous_ = &allocator_for(Device::kCUDA);
  } catch (const std::runtime_error&) {
    previous_ = nullptr;  // none registered (a build without CUDA)
  }
  register_allocator(Device::kCUDA, this);
}

FakeDevice::~FakeDevice() { register_allocator(Device::kCUDA, previous_); }

void* FakeDevice::allocate(int64_t bytes) {
  in_use_ += bytes;
  if (!guarded_) {
    void* p = std::malloc(static_cast<size_t>(bytes > 0 ? bytes : 1));
    if (!p) throw std::bad_alloc();
    pages_[p] = bytes;
    return p;
  }
  const int64_t size = page_rounded(bytes);
  void* p = mmap(nullptr, static_cast<size_t>(size), open_ > 0 ? PROT_READ | PROT_WRITE : PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  pages_[p] = size;
  return p;
}

void FakeDevice::deallocate(void* p, int64_t bytes) {
  in_use_ -= bytes;
  auto it = pages_.find(p);
  if (!guarded_) {
    std::free(p);
    if (it != pages_.end()) pages_.erase(it);
    return;
  }
  if (it == pages_.end()) throw std::logic_error("FakeDevice: freeing memory it did not allocate");
  munmap(p, static_cast<size_t>(it->second));
  pages_.erase(it);
}

bool FakeDevice::owns(const void* p, int64_t bytes) const {
  auto it = pages_.upper_bound(const_cast<void*>(p));
  if (it == pages_.begin()) return false;
  --it;
  const char* begin = static_cast<const char*>(it->first);
  const char* q = static_cast<const char*>(p);
  return q >= begin && q + bytes <= begin + it->second;
}

void FakeDevice::protect_all(int prot) {
  for (const auto& [p, size] : pages_)
    if (mprotect(p, static_cast<size_t>(size), prot) != 0)
      throw std::runtime_error("FakeDevice: mprotect failed");
}

FakeDevice::Access::Access(FakeDevice& d) : d_(d) {
  if (d_.open_++ == 0) {
    ++d_.operations_;
    if (d_.guarded_) d_.protect_all(PROT_READ | PROT_WRITE);
  }
}

FakeDevice::Access::~Access() {
  if (--d_.open_ == 0 && d_.guarded_) d_.protect_all(PROT_NONE);
}

void FakeDevice::set_zero(void* p, int64_t bytes) {
  Access a(*this);
  std::memset(p, 0, static_cast<size_t>(bytes));
}

void FakeDevice::fill_f32(float* p, int64_t n, float value) {
  Access a(*this);
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

void FakeDevice::copy(void* dst, Device dst_device, const void* src, Device src_device,
                      int64_t bytes) {
  if (src_device == Device::kCPU && dst_device == Device::kCUDA) h2d_ += bytes;
  if (src_device == Device::kCUDA && dst_device == Device::kCPU) d2h_ += bytes;
  if (src_device == Device::kCUDA && dst_device == Device::kCUDA) d2d_ += bytes;
  Access a(*this);
  std::memmove(dst, src, static_cast<size_t>(bytes));
}

}  // namespace testing
}  // namespace llmp
