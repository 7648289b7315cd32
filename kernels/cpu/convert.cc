// fp32 <-> 16-bit conversions (convert.h).
#include "kernels/cpu/convert.h"

#include <Eigen/Core>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/tensor/tensor.h"

namespace llmp::cpu {

RoundStats& RoundStats::operator+=(const RoundStats& o) {
  elements += o.elements;
  nonzero += o.nonzero;
  underflow += o.underflow;
  overflow += o.overflow;
  nonfinite += o.nonfinite;
  return *this;
}

namespace {

[[noreturn]] void bad_dtype(const char* fn, DType t) {
  throw std::invalid_argument(std::string(fn) + ": dtype " + to_string(t) +
                              " is not f32, f16 or bf16");
}

template <typename H>
void widen_as(const void* src, float* dst, int64_t n) {
  const H* s = static_cast<const H*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
}

/// dst = round(src) or, with Accumulate, round(dst + src); counts into st.
template <typename H, bool Accumulate>
void round_as(const float* src, void* dst, int64_t n, RoundStats* st) {
  H* d = static_cast<H*>(dst);
  RoundStats s;
  for (int64_t i = 0; i < n; ++i) {
    const float x = Accumulate ? static_cast<float>(d[i]) + src[i] : src[i];
    const H h(x);  // round to nearest even
    d[i] = h;
    if (!st) continue;
    const float back = static_cast<float>(h);
    if (x != 0.0f) ++s.nonzero;
    if (x != 0.0f && back == 0.0f) ++s.underflow;
    if (std::isfinite(x) && std::isinf(back)) ++s.overflow;
    if (!std::isfinite(back)) ++s.nonfinite;
  }
  if (st) {
    s.elements = n;
    *st += s;
  }
}

template <bool Accumulate>
void round_f32(const float* src, float* dst, int64_t n, RoundStats* st) {
  RoundStats s;
  for (int64_t i = 0; i < n; ++i) {
    const float x = Accumulate ? dst[i] + src[i] : src[i];
    dst[i] = x;
    if (st) {
      if (x != 0.0f) ++s.nonzero;
      if (!std::isfinite(x)) ++s.nonfinite;
    }
  }
  if (st) {
    s.elements = n;
    *st += s;
  }
}

}  // namespace

void widen(const void* src, DType src_dtype, float* dst, int64_t n) {
  switch (src_dtype) {
    case DType::kF32:
      if (src != dst) std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16: return widen_as<Eigen::half>(src, dst, n);
    case DType::kBF16: return widen_as<Eigen::bfloat16>(src, dst, n);
    default: bad_dtype("widen", src_dtype);
  }
}

void round_to(const float* src, void* dst, DType dst_dtype, int64_t n, RoundStats* stats) {
  switch (dst_dtype) {
    case DType::kF32:
      if (src != dst) std::memcpy(dst, src, n * sizeof(float));
      if (stats) round_f32<false>(src, static_cast<float*>(dst), n, stats);
      return;
    case DType::kF16: return round_as<Eigen::half, false>(src, dst, n, stats);
    case DType::kBF16: return round_as<Eigen::bfloat16, false>(src, dst, n, stats);
    default: bad_dtype("round_to", dst_dtype);
  }
}

void accumulate_to(const float* src, void* dst, DType dst_dtype, int64_t n, RoundStats* stats) {
  switch (dst_dtype) {
    case DType::kF32: return round_f32<true>(src, static_cast<float*>(dst), n, stats);
    case DType::kF16: return round_as<Eigen::half, true>(src, dst, n, stats);
    case DType::kBF16: return round_as<Eigen::bfloat16, true>(src, dst, n, stats);
    default: bad_dtype("accumulate_to", dst_dtype);
  }
}

namespace {
template <typename H>
void round_values_as(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(H(x[i]));
}
}  // namespace

void round_values(float* x, int64_t n, DType dtype) {
  switch (dtype) {
    case DType::kF32: return;
    case DType::kF16: return round_values_as<Eigen::half>(x, n);
    case DType::kBF16: return round_values_as<Eigen::bfloat16>(x, n);
    default: bad_dtype("round_values", dtype);
  }
}

namespace {

/// 1 when the fp32 value with bits b is NOT exactly a bf16 value, else 0 (first_inexact).
/// Branch-free, so that the loop over an operand vectorises.
inline uint32_t inexact_bf16(uint32_t b) {
  const uint32_t special = (b & 0x7F800000u) == 0x7F800000u;  // inf and nan
  return ((b & 0xFFFFu) != 0) & !special;
}

/// The same for fp16: 10 mantissa bits down to 2^-14, fewer below, nothing past 65504.
inline uint32_t inexact_f16(uint32_t b) {
  const int biased = static_cast<int>((b >> 23) & 0xFF);
  const uint32_t special = (biased == 0xFF) | ((b & 0x7FFFFFFFu) == 0);  // inf, nan, ±0
  const int e = biased - 127;  // fp32 subnormals (biased 0) land far below fp16's 2^-24
  const int below = -14 - e;   // binades below fp16's smallest normal 2^-14
  const int low = 13 + (below > 0 ? below : 0);  // mantissa bits fp16 lacks at this exponent
  const uint32_t mask = (1u << (low < 23 ? low : 23)) - 1;
  const uint32_t ok = (e <= 15) & (low <= 23) & ((b & mask) == 0);
  return !(special | ok);
}

}  // namespace

int64_t first_inexact(const float* x, int64_t n, DType dtype) {
  if (dtype == DType::kF32) return -1;
  if (dtype != DType::kF16 && dtype != DType::kBF16) bad_dtype("first_inexact", dtype);
  const uint32_t* b = reinterpret_cast<const uint32_t*>(x);
  auto inexact = dtype == DType::kBF16 ? inexact_bf16 : inexact_f16;
  uint32_t any = 0;  // one pass without an early exit (it vectorises); the index on failure only
  if (dtype == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) any |= inexact_bf16(b[i]);
  else
    for (int64_t i = 0; i < n; ++i) any |= inexact_f16(b[i]);
  if (!any) return -1;
  for (int64_t i = 0; i < n; ++i)
    if (inexact(b[i])) return i;
  return -1;
}

float round_trip(float x, DType dtype) {
  switch (dtype) {
    case DType::kF32: return x;
    case DType::kF16: return static_cast<float>(Eigen::half(x));
    case DType::kBF16: return static_cast<float>(Eigen::bfloat16(x));
    default: bad_dtype("round_trip", dtype);
  }
}

}  // namespace llmp::cpu
