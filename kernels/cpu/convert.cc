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

float round_trip(float x, DType dtype) {
  switch (dtype) {
    case DType::kF32: return x;
    case DType::kF16: return static_cast<float>(Eigen::half(x));
    case DType::kBF16: return static_cast<float>(Eigen::bfloat16(x));
    default: bad_dtype("round_trip", dtype);
  }
}

}  // namespace llmp::cpu
