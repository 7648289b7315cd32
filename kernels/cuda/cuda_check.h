// CUDA_CHECK: fail fast on a CUDA runtime error, with the place, the call and the reason.
//
//   CUDA_CHECK(cudaMalloc(&p, bytes));
//   -> kernels/cuda/device_allocator.cc:17: CUDA error: cudaMalloc(&p, bytes) failed:
//      cudaErrorMemoryAllocation: out of memory
//
// Every CUDA runtime call in kernels/cuda goes through it. Kernel launches return nothing, so a
// launch is followed by CUDA_CHECK(cudaGetLastError()) (bad configuration, no kernel image for
// this GPU). The process exits with status 1, as LLMP_CHECK does without MPI; under mpirun the
// launcher then ends the other ranks.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace llmp {

/// "file:line: CUDA error: call failed: cudaErrorName: description". Host-only; it works without a
/// GPU or driver (cudaGetErrorString is part of the runtime library).
inline std::string cuda_error_message(cudaError_t err, const char* call, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": CUDA error: " + call + " failed: " +
         cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
}

/// Prints cuda_error_message() to stderr and exits with status 1. Never returns.
[[noreturn]] inline void cuda_fail(cudaError_t err, const char* call, const char* file, int line) {
  std::fprintf(stderr, "%s\n", cuda_error_message(err, call, file, line).c_str());
  std::fflush(stderr);
  std::exit(1);
}

}  // namespace llmp

#define CUDA_CHECK(call)                                                           \
  do {                                                                             \
    const cudaError_t llmp_cuda_err_ = (call);                                     \
    if (llmp_cuda_err_ != cudaSuccess)                                             \
      ::llmp::cuda_fail(llmp_cuda_err_, #call, __FILE__, __LINE__);                \
  } while (0)

namespace llmp {
namespace cuda {

/// Whether the work recorded before `event` has finished (cudaEventQuery), without leaving the
/// query's "not ready" behind: the runtime keeps cudaErrorNotReady as the thread's last error,
/// and the next launch check (CUDA_CHECK(cudaGetLastError()) after a <<<...>>>) would report it
/// as that launch's failure. Any other error ends the process through CUDA_CHECK. Polled by the
/// NCCL backend's Work::test (common/comm/nccl_process_group.cc) and the upload ring.
inline bool event_done(cudaEvent_t event) {
  const cudaError_t e = cudaEventQuery(event);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();  // clear it
    return false;
  }
  CUDA_CHECK(e);
  return true;
}

}  // namespace cuda
}  // namespace llmp
