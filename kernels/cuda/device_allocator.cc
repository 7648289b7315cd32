// CUDA allocator for Tensor: cudaMallocAsync / cudaFreeAsync (CUDA's pool) behind the Allocator
// interface. See the header.
#include "kernels/cuda/device_allocator.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <unordered_set>

#include "common/tensor/tensor.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fill_kernel.h"
#include "kernels/cuda/upload_ring.h"

namespace llmp {
namespace {

// Device memory from CUDA's stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on the
// device's default memory pool), the caching allocator that NVIDIA's runtime keeps: a freed
// block goes back to the pool, not to the driver, and the next request of its size takes it
// without a call into the driver or a device synchronisation. The model walk allocates and frees
// its activations every step (common/nn/attention.cc, mlp.cc); with plain cudaMalloc / cudaFree
// each free waited for the whole device, which left the GPU idle between kernels.
//   - Stream order: allocation and free are on the legacy default stream (0), which is ordered
//     with every blocking stream, the kernels' stream() included (kernels/cuda/context.h). Work on
//     a non-blocking stream (NCCL's) is complete before its tensors can be freed: NcclWork waits
//     in its destructor, and it holds the tensors until then.
//   - The pool keeps what is freed (release threshold = no limit): the process's footprint on
//     the device is its peak, as with PyTorch's caching allocator. The bytes reported here and in
//     the MemoryTracker are still the bytes asked for, never the pool's cached total.
class CudaAllocator : public Allocator {
 public:
  void* allocate(int64_t bytes) override {
    if (bytes == 0) return nullptr;
    keep_freed_blocks();
    void* p = nullptr;
    CUDA_CHECK(cudaMallocAsync(&p, static_cast<size_t>(bytes), /*legacy default stream=*/0));
    in_use_ += bytes;
    return p;
  }
  void deallocate(void* p, int64_t bytes) override {
    if (p) CUDA_CHECK(cudaFreeAsync(p, /*legacy default stream=*/0));
    in_use_ -= bytes;
  }
  // Tensor::zeros, fill and copy_from on CUDA tensors, on the legacy default stream: a cudaMemset
  // or a fill kernel is ordered before every later kernel (blocking streams are ordered with the
  // legacy stream), every later copy (cudaMemcpy waits for it) and every collective (the NCCL
  // lanes wait for the legacy stream: common/comm/nccl_process_group.cc), so neither makes the
  // host wait. (A device synchronise after each fill was one per layer per step under
  // --attention flash, counted on the emulator: tests/gpu_step_counts_test.sh.) A copy to the
  // host (cudaMemcpy) waits for the device; device-to-device copies are ordered on the stream.
  void set_zero(void* p, int64_t bytes) override {
    CUDA_CHECK(cudaMemset(p, 0, static_cast<size_t>(bytes)));
  }
  void fill_f32(float* p, int64_t n, float value) override { cuda::fill(p, n, value); }
  // cudaMemcpyDefault: the direction comes from the pointers (unified virtual addressing, every
  // 64-bit CUDA platform), so one call serves host->device, device->host and device->device.
  // A small upload (token ids, a shard of a few KiB) goes through the pinned ring, so that it does
  // not make the host wait for the GPU (upload_ring.h); anything else is one cudaMemcpy.
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            int64_t bytes) override {
    const size_t n = static_cast<size_t>(bytes);
    if (dst_device == Device::kCUDA && src_device == Device::kCPU && cuda::UploadRing::fits(n))
      return uploads_.copy(dst, src, n);
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDefault));
  }
  // A strided device-to-device copy (a re-layout: Ulysses' head split, a rank's block of each
  // row) is one cudaMemcpy2DAsync on the legacy default stream, ordered as copy() is, where a
  // cudaMemcpy per run would cost the host one call per row. Pitches past what the call takes
  // (an int's worth of bytes, cudaDevAttrMaxPitch on current GPUs) go run by run.
  void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width,
               int64_t rows, Device device) override {
    constexpr int64_t kMaxPitch = std::numeric_limits<int32_t>::max();
    if (dst_pitch > kMaxPitch || src_pitch > kMaxPitch)
      return Allocator::copy_2d(dst, dst_pitch, src, src_pitch, width, rows, device);
    CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_pitch), src,
                                 static_cast<size_t>(src_pitch), static_cast<size_t>(width),
                                 static_cast<size_t>(rows), cudaMemcpyDeviceToDevice,
                                 /*legacy default stream=*/0));
  }
  int64_t in_use() const { return in_use_; }

 private:
  // Once per device: the default pool's release threshold to "never", so that a synchronisation
  // does not hand the cached blocks back to the driver (the default threshold, 0, would).
  void keep_freed_blocks() {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    if (!configured_.insert(dev).second) return;
    cudaMemPool_t pool = nullptr;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    uint64_t never = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &never));
  }

  int64_t in_use_ = 0;
  std::unordered_set<int> configured_;  // the devices whose pool is configured
  cuda::UploadRing uploads_;
};

CudaAllocator& the_allocator() {
  // Never destroyed: a Tensor freed during static destruction may still need it.
  static CudaAllocator* a = new CudaAllocator;
  return *a;
}

// Registers the allocator when this object file is linked in (BUILD: alwayslink = 1).
[[maybe_unused]] const bool registered = (register_cuda_allocator(), true);

}  // namespace

void register_cuda_allocator() { register_allocator(Device::kCUDA, &the_allocator()); }

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();  // the answer is returned, not left as the last error (sticky w/o driver)
  if (err != cudaSuccess) {
    if (why)
      *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
             cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why) *why = "cudaGetDeviceCount returned 0 devices";
    return false;
  }
  if (why) *why = std::to_string(count) + " CUDA device(s)";
  return true;
}

int64_t cuda_bytes_in_use() { return the_allocator().in_use(); }

}  // namespace llmp
