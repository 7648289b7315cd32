// Small host-to-device copies that do not make the host wait for the GPU.
//
// cudaMemcpy from pageable host memory first waits for all the work queued on the device, then
// copies (CUDA's "API synchronization behavior"). The walk uploads the token ids that way at
// every embedding forward and backward and for the head's targets: three host waits per step,
// two per micro-batch on a pipeline's first stage (counted on the CUDA emulator:
// tools/gpu_step_counts.sh). Each wait drains the GPU's queue, which then idles until the host
// has launched the next kernels.
//
// The ring copies the bytes into one of kSlots page-locked (pinned) host buffers, then queues a
// cudaMemcpyAsync from it on the legacy default stream and records an event after it. The
// caller's memory is free again when copy() returns, and the device sees the bytes before
// anything issued after the copy, as after cudaMemcpy. A slot is written again kSlots copies
// later, once its event says its last copy is done: the host waits only if the GPU is that far
// behind. Copies larger than kSlotBytes are the caller's to make (cudaMemcpy).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace llmp {
namespace cuda {

class UploadRing {
 public:
  static constexpr int kSlots = 8;
  static constexpr size_t kSlotBytes = size_t{1} << 20;  ///< gpt2's ids: 4·B·T = 32 KiB at B = 8

  /// Whether copy() takes a copy of `bytes` bytes.
  static bool fits(size_t bytes) { return bytes <= kSlotBytes; }

  /// Copies `bytes` (≤ kSlotBytes) from host `src` to device `dst` in stream order on the legacy
  /// default stream. `src` may be changed once this returns. The slots (kSlots · kSlotBytes of
  /// pinned memory) are allocated at the first call and kept for the process (never freed: a
  /// copy may be queued at exit). Errors end the process through CUDA_CHECK.
  void copy(void* dst, const void* src, size_t bytes);

 private:
  struct Slot {
    void* host = nullptr;        // kSlotBytes of pinned memory
    cudaEvent_t done = nullptr;  // recorded after the slot's last copy
  };
  Slot slots_[kSlots];
  int next_ = 0;
};

}  // namespace cuda
}  // namespace llmp
