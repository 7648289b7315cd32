// Conversions between fp32 and the 16-bit formats of mixed-precision training.
//
//   format   sign  exponent  mantissa  largest finite   smallest normal   smallest subnormal
//   fp32     1     8         23        3.4e38           1.2e-38           1.4e-45
//   bf16     1     8         7         3.4e38           1.2e-38           9.2e-41
//   fp16     1     5         10        65504            6.1e-5            6.0e-8
//
// widen() is exact: every 16-bit value is an fp32 value. round_to() rounds to nearest, ties to
// even (IEEE 754's default, what tensor cores and torch's .half()/.bfloat16() do), through
// Eigen::half and Eigen::bfloat16. Rounding is where fp16's narrow range bites (Micikevicius et
// al. 2018, "Mixed Precision Training", §3.2): a nonzero fp32 value below half the smallest
// subnormal becomes 0 (underflow), one above the largest finite becomes inf (overflow).
// RoundStats counts both, from the values actually rounded: that is how the training report
// measures the fraction of gradient elements fp16 flushes to zero.
//
// Glossary: n elements; "16-bit" is f16 or bf16 (DType::kF16, DType::kBF16).
#pragma once

#include <cstdint>

namespace llmp {
enum class DType;
}

namespace llmp::cpu {

/// What round_to() saw, accumulated over calls (add the counts of every call you make).
struct RoundStats {
  int64_t elements = 0;    ///< values rounded
  int64_t nonzero = 0;     ///< of them, nonzero in fp32
  int64_t underflow = 0;   ///< nonzero in fp32, exactly 0 after rounding
  int64_t overflow = 0;    ///< finite in fp32, ±inf after rounding
  int64_t nonfinite = 0;   ///< inf or nan after rounding (overflows included)
  RoundStats& operator+=(const RoundStats& o);
};

/// dst[i] = src[i] as fp32, for src of dtype f32 (a copy), f16 or bf16. Throws
/// std::invalid_argument naming the dtype for any other.
void widen(const void* src, DType src_dtype, float* dst, int64_t n);

/// dst[i] = round(src[i]) in dtype f32 (a copy), f16 or bf16. With `stats`, counts underflows,
/// overflows and non-finite results (for f32, only non-finite ones).
void round_to(const float* src, void* dst, DType dst_dtype, int64_t n, RoundStats* stats = nullptr);

/// dst[i] = round(widen(dst[i]) + src[i]): accumulate fp32 values into a 16-bit (or f32) buffer,
/// rounding once per element (gradient accumulation over micro-batches). Counts as round_to.
void accumulate_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                   RoundStats* stats = nullptr);

/// The value x takes after a round trip through `dtype` (f32: x itself).
float round_trip(float x, DType dtype);

/// x[i] = round_trip(x[i], dtype) for i in [0, n), in place: fp32 values made 16-bit values
/// (round to nearest even) that stay in an fp32 buffer, for a product that is to read them as
/// 16-bit operands (mixed precision's dlogits and attention's P and dS: kernel_ops.h
/// MatmulOperands). f32: nothing. Throws std::invalid_argument naming any other dtype.
void round_values(float* x, int64_t n, DType dtype);

/// The index of the first of x[0..n) that is not exactly a value of `dtype` (round_trip(x,
/// dtype) != x; a nan counts as exact), or -1 when every one is. Read off the bits, one pass:
/// bf16 keeps fp32's 8 exponent bits and the top 7 of its 23 mantissa bits, so the low 16 must
/// be 0; fp16 keeps 10 mantissa bits (the low 13 zero) for |x| in [2^-14, 65504], fewer below
/// (subnormals: multiples of 2^-24) and none above; ±0, ±inf and nan are in both; f32: -1.
/// KernelOps' operand check (MatmulOperands) runs it on every operand of a declared product.
/// Throws std::invalid_argument naming any other dtype.
int64_t first_inexact(const float* x, int64_t n, DType dtype);

}  // namespace llmp::cpu
