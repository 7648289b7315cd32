// The subset of the CUDA language the project's kernels use, for g++: a kernel written for nvcc
// compiles unchanged in a target built on //kernels/cuda/emulator (kernels/cuda/device_lang.h) and runs on
// the CPU under block_runner.h's scheduler. Not a CUDA runtime: no <<<...>>> (the test calls
// emu::launch with the kernel's body), no cudaMalloc (device pointers are host pointers).
//
//   qualifiers     __global__, __device__, __host__ vanish; __forceinline__ is inline;
//                  __shared__ is static (one copy, shared by the block's threads, which the
//                  scheduler runs one block at a time); __launch_bounds__ and
//                  __grid_constant__ vanish
//   built-ins      threadIdx, blockIdx, blockDim, gridDim: the running thread's (block_runner.h)
//   barriers       __syncthreads, __syncwarp: the scheduler's block and warp barriers
//   shuffles       __shfl_sync, __shfl_xor_sync, __shfl_down_sync, __shfl_up_sync: each lane
//                  offers its value, every lane of the warp meets, each takes its partner's
//   bf16           __nv_bfloat16 and its conversions, rounding to nearest even as the hardware
//                  (kernels/cpu/convert.h round_trip, the CPU twins' own rounding)
//   math           expf, fmaxf, ... are <cmath>'s; the fast intrinsics (__expf) are exact here
//
// WMMA (nvcuda::wmma) is in wmma.h. Read block_runner.h for what the schedule does and does not
// model.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/emulator/block_runner.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
#define __align__(n) alignas(n)

/// CUDA's dim3 (an extent, each 1 unless given) and uint3 (an index).
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  operator llmp::cuda::emu::Extent() const { return {x, y, z}; }  // NOLINT: CUDA converts too
};

#define threadIdx (::llmp::cuda::emu::thread_idx())
#define blockIdx (::llmp::cuda::emu::block_idx())
#define blockDim (::llmp::cuda::emu::block_dim())
#define gridDim (::llmp::cuda::emu::grid_dim())

inline void __syncthreads() { ::llmp::cuda::emu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) { ::llmp::cuda::emu::sync_warp(mask); }

namespace llmp::cuda::emu {
/// v from lane `from` of the caller's warp (every lane calls; mask must be the full warp's).
template <typename T>
T shuffle_from(unsigned mask, T v, int from) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a register value");
  (void)mask;  // every lane of the warp takes part (exchange's barriers check it)
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = exchange(bits, from);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
/// A lane's partner within its segment of `width` lanes (CUDA: outside the segment, itself).
inline int partner(int target, int width) {
  const int base = lane() / width * width;
  return target >= base && target < base + width ? target : lane();
}
}  // namespace llmp::cuda::emu

template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  namespace e = ::llmp::cuda::emu;
  return e::shuffle_from(mask, v, e::lane() / width * width + src % width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  namespace e = ::llmp::cuda::emu;
  return e::shuffle_from(mask, v, e::partner(e::lane() ^ lane_mask, width));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  namespace e = ::llmp::cuda::emu;
  return e::shuffle_from(mask, v, e::partner(e::lane() + static_cast<int>(delta), width));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  namespace e = ::llmp::cuda::emu;
  return e::shuffle_from(mask, v, e::partner(e::lane() - static_cast<int>(delta), width));
}

/// bf16: fp32's sign, 8 exponent bits and top 7 mantissa bits (kernels/cpu/convert.h).
struct __nv_bfloat16 {
  uint16_t bits;
};
namespace llmp::cuda::emu {
float round_bf16(float x);  ///< kernels/cpu/convert.h round_trip(x, bf16), in cuda_emulator.cc
}
inline __nv_bfloat16 __float2bfloat16(float x) {
  const float r = ::llmp::cuda::emu::round_bf16(x);
  uint32_t u;
  std::memcpy(&u, &r, 4);
  return __nv_bfloat16{static_cast<uint16_t>(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = uint32_t{h.bits} << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

// CUDA's math is in the global namespace.
using std::isfinite;
using std::isinf;
using std::isnan;

inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}

/// *p += v, returning the old value. The emulator runs one thread at a time, so a plain add is
/// atomic here; the order of the adds is the schedule's, as a GPU's is its own.
template <typename T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
