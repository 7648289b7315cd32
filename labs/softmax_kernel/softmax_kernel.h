// Lab softmax_kernel: the adapter header. The tests call softmax_rows() and nothing else, so you
// may organise your kernels and helpers as you like behind this one function.
//
// The row softmax is attention's middle step (P = softmax(QKᵀ/√hs), one row per query) and the
// core of the cross-entropy: kernels/cuda/attention.cu has the project's warp-per-row version,
// kernels/cpu/attention.cc its CPU twin. Here you write one yourself, in CUDA, and run it on the
// CPU under the project's CUDA emulator (kernels/cuda/emulator: every CUDA thread a fiber,
// switched at barriers and shuffles, so a missing __syncthreads shows) and, on a machine with a
// GPU, on the GPU itself.
//
// Glossary: N rows, C columns (the row length), m a row's max, s its sum of exp(x − m); a block
// is a CUDA thread block, a warp its 32 lanes.
#pragma once

#include <cuda_runtime.h>

namespace llmp::lab {

/// y[n][c] = exp(x[n][c] − m_n) / Σ_c' exp(x[n][c'] − m_n),  m_n = max_c' x[n][c'],  for each
/// of the N rows of C elements of x (row-major, fp32), in device memory (cudaMalloc; under the
/// emulator, its registered host memory).
///
/// Numerics: subtracting m_n keeps every exponent ≤ 0, so nothing overflows however large x is
/// (exp(x) alone is +inf in fp32 for x > 88.7). x may hold −inf (a masked entry: its probability
/// is exactly 0), as long as each row has at least one finite element. The tests compare with a
/// double-precision softmax: |y − y_ref| ≤ 1e-6 + 1e-5·y_ref per element.
///
/// Launches: any number of kernels on `stream`, asynchronously (the tests synchronise). Every
/// row length C ≥ 1 must work, not only multiples of a warp or a block; only y's N·C elements may
/// be written (the tests check the floats on both sides), x is not written. x and y do not
/// overlap.
///
/// Errors: N < 0 or C < 1 throws std::invalid_argument naming the value ("softmax_rows: C = 0
/// (want C >= 1)"), before any launch; N = 0 launches nothing. A launch the runtime refuses ends
/// the process with file:line and the runtime's reason (CUDA_CHECK, kernels/cuda/cuda_check.h).
void softmax_rows(const float* x, float* y, int N, int C, cudaStream_t stream);

}  // namespace llmp::lab
