// The CUDA runtime, emulated on the host (kernels/cuda/emulator): what the project's .cu and .cc
// files call, with "device" memory in host memory that the emulator keeps a registry of. A target
// built on //kernels/cuda/emulator:toolkit includes this file for <cuda_runtime.h>, so the
// project's CUDA sources compile unchanged with g++ (each .cu rewritten by cu_to_cc only where
// it launches: kernel<<<grid, block, smem, stream>>>(args) becomes a call of emu::launcher).
//
// Emulated devices, "CUDA emulator", with an H100's per-block shared memory limit: one, or
// $LLMP_CUDA_EMULATOR_DEVICES of them (every device's memory is this process's host memory; the
// number only tells ranks apart, as the emulated NCCL's duplicate-GPU check does). Kernels,
// copies and sets are synchronous: a launch runs to its end before it returns. What a stream
// queues for later is the emulated NCCL's operations (stream_queue.h): events and stream waits
// order those as CUDA orders a stream's work; a launch or copy on a stream with NCCL work pending
// waits for it first. Errors are returned as the runtime returns them (and kept for
// cudaGetLastError) where the runtime would: a copy or a memset whose device side is not within
// one device allocation or whose host side is within one, a launch with an empty grid or a host
// pointer among a kernel's arguments. Not checked: the 48 KiB of dynamic shared memory a kernel
// gets without cudaFuncSetAttribute (the launch cannot name its kernel); the emulator's own limit
// is an H100's opt-in maximum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "kernels/cuda/emulator/api_counts.h"
#include "kernels/cuda/emulator/cuda_emulator.h"

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
using cudaDataType = cudaDataType_t;

struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;
constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1;
constexpr unsigned cudaEventDefault = 0, cudaEventDisableTiming = 2;
struct CUmemPoolHandle_st;
using cudaMemPool_t = CUmemPoolHandle_st*;

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();
// Streams and events (streams.cc): a stream is a queue of the emulated NCCL's operations, an event
// the point of its queue where it was recorded. Stream 0 is the legacy default stream; no other
// stream waits for it implicitly (the emulator's kernels have finished when it would matter).
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
/// Waits for the stream's queued work, then frees it.
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
/// cudaErrorNotReady while work queued before it is pending (the queue moves on first).
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
/// cudaSuccess once the work queued on its stream before the record is done, else
/// cudaErrorNotReady (each query moves every stream's queue on).
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
/// Page-locked host memory: plain host memory here (not a device allocation).
cudaError_t cudaMallocHost(void** p, size_t bytes);
cudaError_t cudaFreeHost(void* p);
template <typename T>
cudaError_t cudaMallocHost(T** p, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t err);
const char* cudaGetErrorString(cudaError_t err);

cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* p, cudaStream_t stream);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream = nullptr);
/// The C++ API's typed forms, as <cuda_runtime.h> has them.
template <typename T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
template <typename T>
cudaError_t cudaMallocAsync(T** p, size_t bytes, cudaStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void**>(p), bytes, stream);
}
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream = nullptr);

namespace llmp::cuda::emu {
cudaError_t set_func_attribute(const void* kernel, int attr, int value);
}  // namespace llmp::cuda::emu

/// Opts a kernel in to more dynamic shared memory: the value checked against the device's limit.
template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel kernel, cudaFuncAttribute attr, int value) {
  return ::llmp::cuda::emu::set_func_attribute(reinterpret_cast<const void*>(kernel),
                                               static_cast<int>(attr), value);
}

namespace llmp::cuda::emu {

/// Whether p is inside a live emulated device allocation (or one past its end).
bool is_device_pointer(const void* p);
/// Whether [p, p + bytes) lies within one live emulated device allocation.
bool is_device_range(const void* p, size_t bytes);
/// Returns once the work queued on `stream` (the emulated NCCL's) is done: what a launch or copy
/// issued on that stream waits for (streams.cc). Stream 0's queue is usually empty.
void wait_for_stream(cudaStream_t stream);
/// A launch error the next cudaGetLastError returns (CUDA's "sticky" launch errors).
void set_launch_error(cudaError_t err, const std::string& why);
/// What cudaEventQuery and cudaStreamQuery leave when the work is not done: cudaErrorNotReady as
/// the last error, until a cudaGetLastError clears it. Frameworks clear it after such a query
/// (PyTorch's CUDAEvent::query); one that does not fails its next launch check. The emulator
/// assumes the stricter behaviour, so that a missing clear fails here.
void note_not_ready();

template <typename T>
bool host_pointer_arg(const T&) {
  return false;
}
template <typename T>
bool host_pointer_arg(T* p) {
  return p != nullptr && !is_device_pointer(p);
}

/// kernel<<<grid, block, smem, stream>>>(args...) as cu_to_cc writes it:
///   launcher([&](auto&&... a) { kernel(a...); }, grid, block, smem, stream)
///       .named("kernel")(args...)
/// (the kernel called, not taken by address, so that its template arguments are deduced from the
/// arguments as a launch deduces them). Checks the configuration (no empty grid or block, a grid
/// within the device's limits: a negative int count passed as the grid is ~4·10⁹ blocks, which
/// a GPU refuses and the emulator would otherwise run for hours) and that no argument is a host
/// pointer, counts the launch under its name (api_counts.h), then runs the grid (block_runner.h).
template <typename Call>
struct Launcher {
  Call call;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const char* name = "(unnamed kernel)";
  Launcher named(const char* kernel) const {
    Launcher l = *this;
    l.name = kernel;
    return l;
  }
  template <typename... Args>
  void operator()(Args&&... args) const {
    if (size_t{grid.x} * grid.y * grid.z == 0 || size_t{block.x} * block.y * block.z == 0)
      return set_launch_error(cudaErrorInvalidConfiguration, "an empty grid or block");
    if (grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u)  // an H100's (CC 9.0) limits
      return set_launch_error(cudaErrorInvalidConfiguration,
                              "a grid of " + std::to_string(grid.x) + " x " +
                                  std::to_string(grid.y) + " x " + std::to_string(grid.z) +
                                  " blocks (x at most 2^31 - 1, y and z at most 65535)");
    int i = 0;
    const bool host = (false || ... || (++i, host_pointer_arg(args)));
    if (host)
      return set_launch_error(cudaErrorInvalidValue,
                              "kernel argument " + std::to_string(i) + " is a host pointer");
    wait_for_stream(stream);
    count_call(CallKind::kLaunch, name);
    launch(grid, block, smem, [&] { call(args...); });
  }
};

template <typename Call>
Launcher<Call> launcher(Call call, dim3 grid, dim3 block, size_t smem = 0,
                        cudaStream_t stream = nullptr) {
  return Launcher<Call>{call, grid, block, smem, stream};
}

}  // namespace llmp::cuda::emu
