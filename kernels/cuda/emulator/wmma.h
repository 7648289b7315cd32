// nvcuda::wmma for the CUDA emulator (cuda_emulator.h): the warp-level matrix products on tensor
// cores, as the CUDA C++ Programming Guide's "Warp Matrix Functions" specify them, for the one
// shape the kernels use: m16n16k16 with bf16 (or fp16-sized) A and B and fp32 accumulators.
//
//   load_matrix_sync(a, p, ldm)        A (16 × 16) row_major: element (m, k) at p[m·ldm + k];
//                                      B (16 × 16) row_major: (k, n) at p[k·ldm + n]; col_major:
//                                      (k, n) at p[n·ldm + k]; an accumulator in the layout given
//   mma_sync(d, a, b, c)               d = a·b + c, products of the 16-bit values summed in fp32
//   store_matrix_sync(p, c, ldm, lay)  c to memory in the layout given
//   fill_fragment(f, v)                every element v
//
// What the hardware requires and the emulator checks (each a fail() naming the value): p 256-bit
// (32-byte) aligned; ldm a multiple of 8 for 16-bit elements, of 4 for fp32 (16 bytes).
//
// How a warp's lanes share a fragment. On a GPU each lane holds some of the elements (the mapping
// is unspecified). Here a lane's load takes the whole matrix, and the lane owns the elements e
// (row-major index) with e mod 32 = its lane: mma_sync computes, and store_matrix_sync writes,
// only those. So after every lane has stored, the whole tile is written; before that a lane
// reading the tile sees the other lanes' elements unwritten, which is why a kernel needs a
// __syncwarp between a store and reads of other lanes' elements, here as on a GPU.
//
// The products are fp32 sums in order k = 0..15 of exact products; the hardware's order and
// rounding within an mma differ, so results agree with a GPU's to fp32 rounding, not bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/emulator/cuda_emulator.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/// A 16 × 16 tile of element type T for operand Use; Layout: how load_matrix_sync reads A or B.
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has the m16n16k16 shape only");
  static constexpr int num_elements = 256;
  float x[256];  ///< row-major (m, k) for A, (k, n) for B, (m, n) for the accumulator
};

namespace detail {
inline void check(const void* p, unsigned ldm, size_t elem_bytes, const char* call) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    ::llmp::cuda::emu::fail(std::string("wmma::") + call + ": pointer " +
                            std::to_string(reinterpret_cast<uintptr_t>(p)) +
                            " is not 32-byte aligned");
  if (ldm * elem_bytes % 16 != 0)
    ::llmp::cuda::emu::fail(std::string("wmma::") + call + ": ldm " + std::to_string(ldm) +
                            " is not a multiple of 16 bytes of elements");
}
inline float value(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float value(float v) { return v; }
inline bool owns(int e) { return e % 32 == ::llmp::cuda::emu::lane(); }
}  // namespace detail

template <typename Use, typename T, typename Layout, typename E>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const E* p, unsigned ldm) {
  static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load takes a layout_t");
  detail::check(p, ldm, sizeof(E), "load_matrix_sync");
  constexpr bool col = std::is_same<Layout, col_major>::value;
  for (int r = 0; r < 16; ++r)  // r: the row of A (m) or of B (k)
    for (int s = 0; s < 16; ++s)
      f.x[r * 16 + s] = detail::value(col ? p[size_t(s) * ldm + r] : p[size_t(r) * ldm + s]);
}

template <typename T>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, T>& f, const float* p, unsigned ldm,
                      layout_t layout) {
  detail::check(p, ldm, sizeof(float), "load_matrix_sync");
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n)
      f.x[m * 16 + n] = layout == mem_row_major ? p[size_t(m) * ldm + n] : p[size_t(n) * ldm + m];
}

template <typename T>
void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, T>& f, unsigned ldm,
                       layout_t layout) {
  detail::check(p, ldm, sizeof(float), "store_matrix_sync");
  for (int e = 0; e < 256; ++e) {
    if (!detail::owns(e)) continue;
    const int m = e / 16, n = e % 16;
    (layout == mem_row_major ? p[size_t(m) * ldm + n] : p[size_t(n) * ldm + m]) = f.x[e];
  }
}

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float v) {
  // A and B hold 16-bit values: v as the hardware would take it
  const float w = std::is_same<T, float>::value ? v : __bfloat162float(__float2bfloat16(v));
  for (float& x : f.x) x = w;
}

template <typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  for (int e = 0; e < 256; ++e) {
    if (!detail::owns(e)) continue;
    const int m = e / 16, n = e % 16;
    float acc = c.x[e];
    for (int k = 0; k < 16; ++k) acc += a.x[m * 16 + k] * b.x[k * 16 + n];
    d.x[e] = acc;
  }
}

}  // namespace nvcuda::wmma
