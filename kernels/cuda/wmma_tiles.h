// The building blocks of the tensor-core blockwise attention (attention_block_tc.cu, the forward;
// attention_block_tc_backward.cu, the two backward passes): WMMA bf16 16 × 16 × 16 fragments with
// fp32 accumulators, one warp's products over a 16-row strip, the shared-memory layout of each
// kernel, and the loads of a 64-row tile of one head from a strided (B,Tl,·) buffer. Device code:
// nvcc, or g++ with the CPU emulator (device_lang.h).
//
// Layouts: every tile in shared memory is row-major, kT = 64 rows of HS (head size) columns; a
// warp owns rows [16w, 16w + 16) of its block's tile and 16 rows of per-warp scratch. WMMA wants
// 32-byte aligned pointers and leading dimensions that are multiples of 8 (bf16) or 4 (fp32):
// every buffer starts 128-byte aligned, HS is a multiple of 16, and fragment offsets are
// multiples of 16 rows and columns.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_lang.h"
#include "kernels/cuda/flash_tiles.h"
#include "kernels/cuda/launch.h"

namespace llmp {
namespace cuda {
namespace tc {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;
constexpr int kT = kFlashTile, kR = kFlashTile / kFlashWarps, kTcThreads = kFlashWarps * kWarp;
static_assert(kR == 16, "each warp owns one 16-row WMMA fragment of the tile");

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr size_t align128(size_t n) { return (n + 127) / 128 * 128; }

/// A block's dynamic shared memory, in bytes: row-major tiles of kT rows, each buffer 128-byte
/// aligned (WMMA wants 32), per-warp scratch of kR rows.
template <int HS>
struct Smem {
  static constexpr int kSld = HS > kT ? HS : kT;  // forward scratch: S (kT wide), then P~V (HS)
  static constexpr size_t tile16 = align128(size_t{kT} * HS * 2);                 // bf16 kT × HS
  static constexpr size_t tile32 = align128(size_t{kT} * HS * 4);                 // f32 kT × HS
  static constexpr size_t warps32 = align128(size_t{kFlashWarps} * kR * kT * 4);  // f32 16 × kT
  static constexpr size_t warps16 = align128(size_t{kFlashWarps} * kR * kT * 2);  // bf16 16 × kT
  static constexpr size_t fwd_scratch = align128(size_t{kFlashWarps} * kR * kSld * 4);
  static constexpr size_t rows = align128(size_t{kT} * 4);  // f32 per row
  // forward: q, k, v; O; S then P~V; P~; m, l, α
  static constexpr size_t forward = 3 * tile16 + tile32 + fwd_scratch + warps16 + 3 * rows;
  // dQ pass: q, dO, k, v; dQ; S, dP; dS; lse, D
  static constexpr size_t dq = 4 * tile16 + tile32 + 2 * warps32 + warps16 + 2 * rows;
  // dK|dV pass: k, v, q, dO; dK, dV; Sᵀ, dPᵀ; Pᵀ, dSᵀ; lse, D
  static constexpr size_t dkv = 4 * tile16 + 2 * tile32 + 2 * warps32 + 2 * warps16 + 2 * rows;
};

/// Consecutive buffers of the dynamic shared memory.
struct Carve {
  unsigned char* p;
  template <typename T>
  __device__ T* take(size_t bytes) {
    T* t = reinterpret_cast<T*>(p);
    p += bytes;
    return t;
  }
};

/// Where a block works: its (b, h) (blockIdx.y = b·H + h), its tile of rows [r0, r1) of the Tl
/// (blockIdx.x: queries in the forward and the dQ pass, keys in the dK|dV pass), c = Tl/2, its
/// warp and lane, and row0 = (b·H + h)·Tl, its (b, h)'s first row in m, l, lse, D (B,H,Tl).
struct BlockAt {
  int b, h, r0, r1, c, warp, lane;
  int64_t row0;
};
__device__ __forceinline__ BlockAt block_at(int H, int Tl) {
  const int bh = blockIdx.y, r0 = blockIdx.x * kT, t = threadIdx.x;
  return BlockAt{bh / H, bh % H,    r0,        r0 + kT < Tl ? r0 + kT : Tl,
                 Tl / 2, t / kWarp, t % kWarp, static_cast<int64_t>(bh) * Tl};
}

/// dst[r] = stat[row0 + r0 + r] for the kT rows of a tile, `pad` past Tl: a row statistic of one
/// (b, h) (m, l, lse or D, (B,H,Tl)) into shared memory.
__device__ __forceinline__ void load_stat(float* dst, const float* stat, int64_t row0, int r0,
                                          int Tl, float pad) {
  for (int r = threadIdx.x; r < kT; r += kTcThreads)
    dst[r] = r0 + r < Tl ? stat[row0 + r0 + r] : pad;
}

/// Element e of head h's hs channels of row i of sequence b in a (B,Tl,·) buffer of ld floats.
__device__ __forceinline__ int64_t at(int b, int i, int h, int e, int ld, int Tl, int hs) {
  return (static_cast<int64_t>(b) * Tl + i) * ld + static_cast<int64_t>(h) * hs + e;
}

/// dst (kT × HS bf16) = rows [r0, r0 + kT) of head h of sequence b, zeros past Tl.
template <int HS>
__device__ void load_bf16(bf16* dst, const float* src, int ld, int b, int h, int r0, int Tl) {
  for (int e = threadIdx.x; e < kT * HS; e += kTcThreads) {
    const int i = r0 + e / HS;
    dst[e] = __float2bfloat16(i < Tl ? src[at(b, i, h, e % HS, ld, Tl, HS)] : 0.0f);
  }
}
/// The same in fp32 (an accumulator's running values).
template <int HS>
__device__ void load_f32(float* dst, const float* src, int ld, int b, int h, int r0, int Tl) {
  for (int e = threadIdx.x; e < kT * HS; e += kTcThreads) {
    const int i = r0 + e / HS;
    dst[e] = i < Tl ? src[at(b, i, h, e % HS, ld, Tl, HS)] : 0.0f;
  }
}
/// Rows [r0, r0 + kT) ∩ [0, Tl) of dst = src (kT × HS f32).
template <int HS>
__device__ void store_f32(float* dst, int ld, const float* src, int b, int h, int r0, int Tl) {
  for (int e = threadIdx.x; e < kT * HS; e += kTcThreads) {
    const int i = r0 + e / HS;
    if (i < Tl) dst[at(b, i, h, e % HS, ld, Tl, HS)] = src[e];
  }
}

/// One warp: C (16 × N f32, row-major ldc) = A (16 × K) · Bᵀ, with A (lda) and B (N × K, ldb)
/// row-major bf16. Bᵀ read as WMMA's column-major matrix_b: element (k, n) at B[n·ldb + k].
template <int K, int N>
__device__ void warp_abt(float* C, int ldc, const bf16* A, int lda, const bf16* B, int ldb) {
#pragma unroll
  for (int n = 0; n < N; n += 16) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < K; k += 16) {
      FragA a;
      FragBt bt;
      wmma::load_matrix_sync(a, A + k, lda);
      wmma::load_matrix_sync(bt, B + n * ldb + k, ldb);
      wmma::mma_sync(acc, a, bt, acc);
    }
    wmma::store_matrix_sync(C + n, acc, ldc, wmma::mem_row_major);
  }
}

/// One warp: C (16 × N f32) = (accumulate ? C : 0) + A (16 × K) · B (K × N), row-major bf16.
template <int K, int N>
__device__ void warp_ab(float* C, int ldc, const bf16* A, int lda, const bf16* B, int ldb,
                        bool accumulate) {
#pragma unroll
  for (int n = 0; n < N; n += 16) {
    FragC acc;
    if (accumulate)
      wmma::load_matrix_sync(acc, C + n, ldc, wmma::mem_row_major);
    else
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < K; k += 16) {
      FragA a;
      FragB bb;
      wmma::load_matrix_sync(a, A + k, lda);
      wmma::load_matrix_sync(bb, B + k * ldb + n, ldb);
      wmma::mma_sync(acc, a, bb, acc);
    }
    wmma::store_matrix_sync(C + n, acc, ldc, wmma::mem_row_major);
  }
}

}  // namespace tc
}  // namespace cuda
}  // namespace llmp
