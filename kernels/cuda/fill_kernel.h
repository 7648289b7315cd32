// The fill kernel: every element of a device buffer set to one value.
//
// It belongs to the device allocator's target because Tensor::fill on a CUDA tensor reaches it
// through Allocator::fill_f32 (device_allocator.cc); fill_copy.h adds the Tensor-level form.
//
// Launch shape: a grid-stride loop (each thread handles elements i, i + G, i + 2G, ... with
// G = gridDim.x * blockDim.x), so a capped grid covers any n and the kernel is correct for every
// launch configuration.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace llmp {
namespace cuda {

/// Sets d[0..n) to `value` on `stream` (asynchronous: synchronise before reading on the host).
/// d must be device memory holding n floats; n == 0 launches nothing. Launch errors are reported
/// through CUDA_CHECK (file:line, call, reason).
void fill(float* d, int64_t n, float value, cudaStream_t stream = 0);

}  // namespace cuda
}  // namespace llmp
