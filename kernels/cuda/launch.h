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
//   - per column (bias and LayerNorm weight gradients: Σ over N rows): one thread per column
//     looping over the rows, so each sum is sequential and deterministic, reads coalesced.
// And AdamW's decay ranges become one launch per run of equal λ (adamw_segments).
//
// Glossary: n elements, N rows, C columns (channels), kWarp = 32 lanes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

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

/// A run [begin, end) of AdamW elements with one weight decay: λ inside a decay range, 0 outside.
struct AdamWSegment {
  int64_t begin = 0, end = 0;
  bool decayed = false;
  bool operator==(const AdamWSegment& o) const {
    return begin == o.begin && end == o.end && decayed == o.decayed;
  }
};

/// Splits elements [i0, i0 + count) of the flat buffer into the runs inside and outside the
/// decay ranges (sorted, disjoint: AdamW's constructor checks), each run non-empty, in order,
/// covering the span exactly. One kernel launch per run then applies λ or 0 (common/optim/adamw.cc
/// decides per element; the runs give the same λ to every element).
template <typename Range>  // common/optim's ElementRange: {int64_t begin, end}
std::vector<AdamWSegment> adamw_segments(const std::vector<Range>& decay, int64_t i0,
                                         int64_t count) {
  std::vector<AdamWSegment> out;
  const int64_t end = i0 + count;
  int64_t at = i0;
  for (const Range& r : decay) {
    if (r.end <= at) continue;
    if (r.begin >= end) break;
    const int64_t b = std::max(r.begin, at), e = std::min(r.end, end);
    if (b > at) out.push_back({at, b, false});
    if (e > b) out.push_back({b, e, true});
    at = e;
  }
  if (at < end) out.push_back({at, end, false});
  return out;
}

}  // namespace cuda
}  // namespace llmp
