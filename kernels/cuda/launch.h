// Launch shapes of the CUDA kernels, as host functions the CPU tests can check (launch_test).
//
// Four shapes cover every kernel of kernels/cuda:
//   - element-wise (GELU, residual, embeddings, AdamW, conversions): a grid-stride loop over n
//     elements, kThreads per block, at most kMaxBlocks blocks (fill_copy.cu's shape): correct
//     for any n, since each thread steps by the grid's size.
//   - one warp per row (LayerNorm, the causal softmax): kThreads/32 rows per block, a row's C
//     (or T) elements strided over the 32 lanes, sums by __shfl_xor_sync.
//   - one block per row (cross-entropy over a vocabulary row of Vr ~ 50k logits): a row per
//     block, block-wide reduction through shared memory.
//   - per column (bias and LayerNorm weight gradients: Σ over N rows): column_sums.h's two
//     passes (32 columns × a slice of rows per block, then one thread per column adding the
//     slices' partials in order: deterministic, reads coalesced); column_blocks sizes pass 2.
//
// Glossary: n elements, N rows, C columns (channels), kWarp = 32 lanes.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/hd.h"

namespace llmp {
namespace cuda {

constexpr int kThreads = 256;         ///< threads per block (8 warps) for every kernel here
constexpr int kWarp = 32;             ///< lanes per warp
constexpr int64_t kMaxBlocks = 4096;  ///< cap of grid-stride grids (2^20 threads)

/// Blocks of kThreads for a grid-stride loop over n elements: ceil(n / kThreads), capped at
/// kMaxBlocks; 0 for n ≤ 0 (the caller then launches nothing: a 0-block launch is an error).
inline int elementwise_blocks(int64_t n) {
  if (n <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

/// Blocks for one warp per row over N rows: ceil(N / (kThreads/32)). Warp w of block b owns
/// row b·8 + w; the warps past N (last block) return at once.
inline int warp_per_row_blocks(int64_t N) {
  constexpr int rows_per_block = kThreads / kWarp;
  return N <= 0 ? 0 : static_cast<int>((N + rows_per_block - 1) / rows_per_block);
}

/// The row a warp owns under warp_per_row_blocks: block·(kThreads/32) + thread/32.
LLMP_HD int64_t warp_row(int block, int thread) {
  return static_cast<int64_t>(block) * (kThreads / kWarp) + thread / kWarp;
}

/// Blocks for one thread per column over C columns: ceil(C / kThreads).
inline int column_blocks(int64_t C) {
  return C <= 0 ? 0 : static_cast<int>((C + kThreads - 1) / kThreads);
}

constexpr int kMaxReduceBlocks = 1024;  ///< partials of a two-pass whole-buffer reduction

/// Blocks of the first pass of a whole-buffer reduction (reduce.cu): elementwise_blocks(n)
/// capped at kMaxReduceBlocks, so the second pass (one block) sums at most 1024 partials.
inline int reduce_blocks(int64_t n) {
  return std::min<int>(elementwise_blocks(n), kMaxReduceBlocks);
}

}  // namespace cuda
}  // namespace llmp
