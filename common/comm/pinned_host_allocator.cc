// Pinned host memory (cudaMallocHost / cudaFreeHost) for the MPI backend's staging buffers
// (process_group_staging.h): device <-> host copies from pinned memory run at full PCIe speed
// and without the driver's own bounce buffer. Registered when this object file is linked in
// (BUILD: alwayslink) and a CUDA device is present; without one staging keeps plain host memory.
// Compiled here, never run (no GPU).
#include <cuda_runtime.h>

#include "common/comm/process_group_staging.h"
#include "kernels/cuda/cuda_check.h"

namespace llmp {
namespace {

class PinnedHostAllocator final : public Allocator {
 public:
  void* allocate(int64_t bytes) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, static_cast<size_t>(bytes > 0 ? bytes : 1)));
    return p;
  }
  void deallocate(void* p, int64_t /*bytes*/) override { CUDA_CHECK(cudaFreeHost(p)); }
};

bool register_if_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();  // no driver: an answer, not an error to leave behind
  if (err != cudaSuccess || count == 0) return false;
  static PinnedHostAllocator* a = new PinnedHostAllocator;  // never destroyed (static frees)
  register_pinned_host_allocator(a);
  return true;
}

[[maybe_unused]] const bool registered = register_if_device();

}  // namespace
}  // namespace llmp
