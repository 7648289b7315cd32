// The CUDA device allocator: how a Tensor with Device::kCUDA gets its memory.
//
// Tensor (common/tensor/tensor.h) asks allocator_for(device) for bytes and counts them in the
// MemoryTracker under the tensor's category (parameters, gradients, ...). This file supplies the
// device side: CUDA's stream-ordered pool allocator (cudaMallocAsync / cudaFreeAsync), each call
// through CUDA_CHECK. Linking :device_allocator registers it for Device::kCUDA before main() (a
// static registrar, kept by alwayslink); register_cuda_allocator() does the same by hand and may
// be called again.
//
// Plain cudaMalloc / cudaFree are slow, and cudaFree waits for the whole device; the model walk
// allocates and frees activations every step, so the GPU sat idle at every free (measured on an
// H100: tools/gpu_bench.sh, README "On a GPU"). PyTorch hides that behind its caching allocator;
// the CUDA runtime has one of its own, the memory pool, and this allocator uses it (a freed block
// is kept for the next request). The bytes it reports are exactly the bytes asked for, not what
// the pool holds.
//
// cuda_device_available() asks the driver whether a GPU is there. A build machine has the toolkit
// but no GPU (or no driver): the answer is false with the runtime's reason, never a crash, and the
// GPU tests skip themselves with that reason.
#pragma once

#include <cstdint>
#include <string>

namespace llmp {

/// Registers the CUDA allocator for Device::kCUDA (idempotent). Touches no device: a binary can
/// register it on a machine without a GPU; the first allocation there fails with CUDA_CHECK.
void register_cuda_allocator();

/// True when the CUDA runtime sees at least one device. Otherwise false, and `*why` (if given)
/// says why, e.g. "cudaGetDeviceCount: cudaErrorInsufficientDriver: CUDA driver version is
/// insufficient for CUDA runtime version" or "cudaGetDeviceCount returned 0 devices".
/// With a device present it leaves no error behind for a later CUDA_CHECK(cudaGetLastError()).
/// Without a driver the runtime fails to initialise and reports that from every later call
/// (cudaGetLastError included, it cannot be cleared): ask this first, before any other CUDA call.
bool cuda_device_available(std::string* why = nullptr);

/// Device bytes currently held through this allocator (all categories). The MemoryTracker counts
/// the same bytes by category; this total lets a test check the two agree.
int64_t cuda_bytes_in_use();

}  // namespace llmp
