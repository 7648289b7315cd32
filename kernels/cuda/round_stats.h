// Mixed precision's rounding statistics on the GPU (kernels/ops/kernel_ops.h count_rounding):
// what rounding fp32 values to f16/bf16 would flush to zero or push to infinity, counted without
// writing, so that the mixed_precision stage's report reads the same counts on a GPU as
// kernels/cpu/convert.h's round_to / accumulate_to take on the CPU.
//
//   x_i = src[i]                          (round_to)
//   x_i = widen(dst[i]) + src[i]          (accumulate_to)
//   h_i = round(x_i) to nearest even      (shared_math.h's bit conversions; f32: x_i itself)
//   nonzero   = #{ x_i != 0 }
//   underflow = #{ x_i != 0 and h_i == 0 }
//   overflow  = #{ x_i finite and h_i = ±inf }
//   nonfinite = #{ h_i inf or nan }
//
// Launch shape: two passes as reduce.h's: reduce_blocks(n) blocks of a grid-stride
// loop, the four counts block_sum'med per block into 4·k partials in the workspace, then one
// block sums each counter's partials; the four totals are copied back (synchronising stream()).
// Glossary: n elements. Device pointers.
#pragma once

#include <cstdint>

#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace cuda {

/// The counts above for src[0..n) (fp32) and dst[0..n) (dst_dtype: f32, f16 or bf16; read only
/// when `accumulate`), elements = n. Neither buffer is written. Synchronises stream(). Throws
/// std::invalid_argument naming any other dtype.
cpu::RoundStats count_rounding(const float* src, const void* dst, DType dst_dtype, int64_t n,
                               bool accumulate);

}  // namespace cuda
}  // namespace llmp
