// fill and host <-> device copies: the first CUDA kernels of the project.
//
// What: a fill kernel (every element of a device buffer set to one value) and the two copies that
// move a Tensor between host and device memory. Why these first: they are the smallest pieces
// that exercise the whole CUDA path end to end (nvcc through the build, the device allocator,
// memory accounting, a kernel launch, error checking) and every later GPU backend needs them:
// zeroing gradient buffers before accumulation, moving the initial parameters and each batch onto
// the device, and bringing results back to compare against the CPU baseline. The GPU versions of
// the layers (common/nn) and of the stages' collectives (NCCL) come later and build on these.
//
// The raw fill(float*, n, value) is in fill_kernel.h (the device allocator's target: Tensor::fill
// on a CUDA tensor reaches it); this header adds the Tensor-level forms.
//
// Glossary: n = number of elements; d = device pointer; stream = CUDA stream (0 = default stream).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/tensor/tensor.h"
#include "kernels/cuda/fill_kernel.h"

namespace llmp {
namespace cuda {

/// fill() on a whole f32 CUDA tensor (or view). Throws std::invalid_argument, naming the tensor,
/// for a CPU or non-f32 tensor.
void fill(const Tensor& dev, float value, cudaStream_t stream = 0);

/// A new CUDA tensor with the shape, dtype, memory category and contents of `host`
/// (host must be on the CPU; throws std::invalid_argument naming it otherwise). The copy is
/// synchronous (cudaMemcpy): when it returns the data is on the device. The device bytes are
/// counted by the MemoryTracker under host.category().
Tensor copy_to_device(const Tensor& host);

/// A new CPU tensor with the shape, dtype, category and contents of `dev` (dev must be a CUDA
/// tensor; throws std::invalid_argument otherwise). Synchronous; cudaMemcpy on the default
/// stream also waits for earlier work on the default stream, such as a fill() on stream 0.
Tensor copy_to_host(const Tensor& dev);

}  // namespace cuda
}  // namespace llmp
