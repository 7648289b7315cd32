// StagingPool: host buffers standing in for device tensors in MPI calls. See the header for what
// each operation copies and why.
#include "common/comm/process_group_staging.h"

#include <algorithm>

namespace llmp {

namespace {
Allocator* g_pinned = nullptr;  // set by a CUDA target when linked (pinned_host_allocator.cc)
}  // namespace

void register_pinned_host_allocator(Allocator* a) { g_pinned = a; }

Allocator* pinned_host_allocator() { return g_pinned; }

Tensor StagingPool::allocate(DType dtype, int64_t numel) {
  // A host Tensor either way, counted in the MemoryTracker like any other; with a CUDA target
  // linked its bytes are pinned (page-locked), so cudaMemcpy to and from it runs at full speed.
  if (!g_pinned) return Tensor::empty({numel}, dtype, MemCategory::kOther, Device::kCPU);
  return Tensor::empty_from(*g_pinned, {numel}, dtype, MemCategory::kOther, Device::kCPU);
}

std::shared_ptr<StagingPool::Buffer> StagingPool::acquire(DType dtype, int64_t numel) {
  const int64_t bytes = numel * dtype_size(dtype);
  std::shared_ptr<Buffer> fits, free_same_dtype;
  for (auto& b : buffers_) {
    if (b.use_count() != 1 || b->data.dtype() != dtype) continue;  // busy, or another dtype
    if (b->data.nbytes() >= bytes && (!fits || b->data.nbytes() < fits->data.nbytes())) fits = b;
    if (!free_same_dtype || b->data.nbytes() > free_same_dtype->data.nbytes()) free_same_dtype = b;
  }
  if (fits) return fits;
  if (free_same_dtype) {  // grow-only: replace the largest free one by one that fits
    stats_.buffer_bytes -= free_same_dtype->data.nbytes();
    free_same_dtype->data = allocate(dtype, numel);
    stats_.buffer_bytes += free_same_dtype->data.nbytes();
    return free_same_dtype;
  }
  auto b = std::make_shared<Buffer>();
  b->data = allocate(dtype, numel);
  stats_.buffer_bytes += b->data.nbytes();
  stats_.buffers += 1;
  buffers_.push_back(b);
  return b;
}

Tensor StagingPool::stage(const Tensor& t, bool down, std::vector<Lease>* leases) {
  if (t.device() == Device::kCPU) return t;
  std::shared_ptr<Buffer> b = acquire(t.dtype(), t.numel());
  leases->push_back(b);
  Tensor host = b->data.narrow(0, t.numel());
  if (down) copy_down(t, host);
  return host;
}

void StagingPool::copy_up(const Tensor& host, Tensor& device) {
  if (host.raw() == device.raw() && host.device() == device.device()) return;
  device.copy_from(host);
  stats_.to_device_bytes += device.nbytes();
}

void StagingPool::copy_down(const Tensor& device, Tensor& host) {
  host.copy_from(device);
  stats_.to_host_bytes += device.nbytes();
}

void StagingDebt::settle() {
  for (auto& u : up) pool->copy_up(u.first, u.second);
  up.clear();
  leases.clear();  // the buffers are free again
}

}  // namespace llmp
