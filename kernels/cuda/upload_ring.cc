// The upload ring (upload_ring.h): pinned slots, each reused once its last copy is done.
#include "kernels/cuda/upload_ring.h"

#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace llmp {
namespace cuda {

void UploadRing::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  Slot& s = slots_[next_];
  next_ = (next_ + 1) % kSlots;
  if (s.host == nullptr) {
    CUDA_CHECK(cudaMallocHost(&s.host, kSlotBytes));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  } else if (!event_done(s.done)) {  // its copy of kSlots uploads ago: done by now, unless
    CUDA_CHECK(cudaEventSynchronize(s.done));  // the GPU is that far behind
  }
  std::memcpy(s.host, src, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, /*legacy default=*/0));
  CUDA_CHECK(cudaEventRecord(s.done, /*legacy default stream=*/0));
}

}  // namespace cuda
}  // namespace llmp
