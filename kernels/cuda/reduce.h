// Whole-buffer reductions and dtype conversions on the GPU: what the training loop needs around
// the optimizer step (the gradient norm for clipping, the non-finite check of a loss scaler) and
// the fp32 <-> f16/bf16 conversions of mixed precision (the twins of kernels/cpu/convert.h's
// widen, round_to and accumulate_to, without RoundStats).
//
//   sum_of_squares = Σ_i x_i² (in double; the gradient norm of --clip_grad is its square root,
//                    common/optim/grad_clip.h; the twin of kernels/cpu/grad_norm.h)
//   count_nonfinite = #{ i : x_i is inf or NaN }
//   round_to: round to nearest, ties to even (IEEE 754's default, as Eigen::half/bfloat16 and
//   __float2half_rn), through shared_math.h's bit conversions, checked against the CPU on the host.
//
// Launch shape: the reductions are two passes: reduce_blocks(n) blocks of a grid-stride loop,
// each thread accumulating in double (or int64), a block_sum, one partial per block into the
// workspace; then one block sums the partials in a fixed order (deterministic for a given n) and
// the result is copied back (synchronising stream()). The conversions are grid-stride loops.
// Glossary: n elements. Device pointers.
#pragma once

#include <cstdint>

#include "common/tensor/tensor.h"

namespace llmp {
namespace cuda {

/// Σ_i x_i² over x[0..n) (a device buffer of dtype f32, f16 or bf16, widened exactly),
/// accumulated in double. Synchronises stream(). Throws std::invalid_argument naming any other
/// dtype (before any device work).
double sum_of_squares(const void* x, DType dtype, int64_t n);

/// The number of infinite or NaN elements of x[0..n). Synchronises stream().
int64_t count_nonfinite(const float* x, int64_t n);

/// dst[i] = src[i] as fp32, src of dtype f32, f16 or bf16 (exact). Throws
/// std::invalid_argument naming the dtype for any other.
void widen(const void* src, DType src_dtype, float* dst, int64_t n);

/// dst[i] = round(src[i]) in dtype f32 (a copy), f16 or bf16, to nearest even. Throws
/// std::invalid_argument naming the dtype for any other.
void round_to(const float* src, void* dst, DType dst_dtype, int64_t n);

/// dst[i] = round(widen(dst[i]) + src[i]) in dtype f32, f16 or bf16: 16-bit gradient
/// accumulation, rounding once per element with round_to's rounding (the twin of
/// kernels/cpu/convert.h accumulate_to, without RoundStats). Throws std::invalid_argument naming
/// the dtype for any other.
void accumulate_to(const float* src, void* dst, DType dst_dtype, int64_t n);

}  // namespace cuda
}  // namespace llmp
