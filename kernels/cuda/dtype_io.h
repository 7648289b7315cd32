// Loading and storing one element of an f32, f16 or bf16 device buffer as fp32 (nvcc only):
// the kernels of adamw.cu and reduce.cu are templated on these tags, so one kernel source serves
// the three dtypes. The bit conversions are shared_math.h's (round to nearest even).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/tensor/tensor.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {

enum class Fmt { kF32, kF16, kBF16 };

template <Fmt F>
__device__ __forceinline__ float load_f32(const void* p, int64_t i) {
  if constexpr (F == Fmt::kF32) return static_cast<const float*>(p)[i];
  if constexpr (F == Fmt::kF16) return f32_from_f16(static_cast<const uint16_t*>(p)[i]);
  if constexpr (F == Fmt::kBF16) return f32_from_bf16(static_cast<const uint16_t*>(p)[i]);
  return 0.0f;
}

template <Fmt F>
__device__ __forceinline__ void store_rounded(void* p, int64_t i, float x) {
  if constexpr (F == Fmt::kF32) static_cast<float*>(p)[i] = x;
  if constexpr (F == Fmt::kF16) static_cast<uint16_t*>(p)[i] = f16_from_f32(x);
  if constexpr (F == Fmt::kBF16) static_cast<uint16_t*>(p)[i] = bf16_from_f32(x);
}

/// Format F as a type, for with_fmt's callbacks: decltype(tag)::value.
template <Fmt F>
struct FmtTag {
  static constexpr Fmt value = F;
};

/// k(FmtTag<f>{}): one launch site for a kernel templated on the three formats,
///   with_fmt(f, [&](auto t) { kernel<decltype(t)::value><<<...>>>(...); });
template <class K>
void with_fmt(Fmt f, K&& k) {
  if (f == Fmt::kBF16) {
    k(FmtTag<Fmt::kBF16>{});
  } else if (f == Fmt::kF16) {
    k(FmtTag<Fmt::kF16>{});
  } else {
    k(FmtTag<Fmt::kF32>{});
  }
}

/// The tag of an f32/f16/bf16 DType; throws std::invalid_argument naming `what` and the dtype.
inline Fmt fmt_of(DType t, const char* what) {
  switch (t) {
    case DType::kF32: return Fmt::kF32;
    case DType::kF16: return Fmt::kF16;
    case DType::kBF16: return Fmt::kBF16;
    default:
      throw std::invalid_argument(std::string(what) + ": dtype " + to_string(t) +
                                  " is not f32, f16 or bf16");
  }
}

/// The Round16 (shared_math.h) of an f32/f16/bf16 DType: kNone for f32. Throws as fmt_of.
inline Round16 round16_of(DType t, const char* what) {
  const Fmt f = fmt_of(t, what);
  return f == Fmt::kBF16 ? Round16::kBF16 : f == Fmt::kF16 ? Round16::kF16 : Round16::kNone;
}

}  // namespace cuda
}  // namespace llmp
