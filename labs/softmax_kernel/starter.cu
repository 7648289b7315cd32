// Lab softmax_kernel: your implementation. Read README.md first, then softmax_kernel.h (the full
// spec); run the tests with
//     bazel test //labs/softmax_kernel:student_test          on the CUDA emulator (any machine)
//     bazel test //labs/softmax_kernel:student_gpu_test      on a GPU (skipped without one)
// They fail until the kernel below is done. Add kernels and __device__ helpers here as you like;
// the tests only call softmax_rows().
//
// What you may use: the CUDA language as kernels/cuda/device_lang.h gives it (threadIdx,
// blockIdx, blockDim, __syncthreads, __shared__, __shfl_xor_sync / __shfl_down_sync, expf,
// fmaxf, INFINITY) and the runtime's launch <<<grid, block, shared bytes, stream>>>. Not
// kernels/cuda/device_util.h's ready-made block sums: writing them is the lab.
//
// Glossary: N rows, C row length, m row max, s row sum, lane = threadIdx.x % 32.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_lang.h"
#include "labs/softmax_kernel/softmax_kernel.h"

namespace llmp::lab {
namespace {

constexpr int kThreads = 128;  // threads per block: 4 warps (change it if you like)

// TODO(lab softmax_kernel): one block per row (blockIdx.x = the row), its kThreads threads
// striding over the row's C elements (c = threadIdx.x, threadIdx.x + kThreads, ...):
//   1. m = the row's max: each thread over its elements, then over the block (a block reduction:
//      the warp's 32 lanes by shuffles, each warp's result through __shared__ memory, with a
//      __syncthreads() between writing and reading it, and another before it is written again);
//   2. s = Σ exp(x − m), each exponential written to y as it is made, reduced like m;
//   3. y *= 1/s.
// Every thread must reach every __syncthreads() (none inside an `if` some threads skip).
__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int C) {
  (void)x, (void)y, (void)C;  // TODO(lab softmax_kernel): remove, and write the three passes.
}

}  // namespace

void softmax_rows(const float* x, float* y, int N, int C, cudaStream_t stream) {
  // TODO(lab softmax_kernel): throw std::invalid_argument for N < 0 or C < 1, naming the value
  // ("softmax_rows: C = 0 (want C >= 1)"); launch nothing for N = 0.
  softmax_rows_kernel<<<N, kThreads, 0, stream>>>(x, y, C);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace llmp::lab
