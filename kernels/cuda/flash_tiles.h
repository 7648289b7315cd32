// Which (query, key) pairs the tensor-core blockwise attention computes (attention_block_tc.cu),
// compiled by both g++ and nvcc (hd.h) so that the host test (flash_tiles_test) checks the very
// functions the kernels call.
//
// The kernels cut a step's Tl query rows and Tl key rows of one (b, h) into tiles of kFlashTile
// rows; a block of kFlashWarps warps owns one tile (16 rows per warp: WMMA's 16 × 16 × 16 bf16
// fragments). Within a tile pair an element (i, j) is computed when key j is visible to query
// i under the step's chunk pairs (kernels/cpu/attention_block.h: chunks of c = Tl/2 rows; kSkip
// none, kDiagonal j ≤ i within the chunk, kFull all), which is `sees`; a tile pair with no
// visible element is skipped whole, which is `tile_sees`. Tiles need not align with chunks: Tl =
// 80 has c = 40, so the first 64-row tile holds all of chunk 0 and 24 rows of chunk 1.
//
// Glossary: i query row, j key row (both in [0, Tl)), c = Tl/2, [i0, i1) × [j0, j1) a tile pair.
#pragma once

#include "kernels/cpu/attention_block.h"
#include "kernels/cuda/hd.h"

namespace llmp {
namespace cuda {

constexpr int kFlashTile = 64;  ///< query (or key) rows of a tile
constexpr int kFlashWarps = 4;  ///< warps of a block: 16 rows each

/// Whether query i sees key j in a step with chunk pairs p (c = Tl/2 rows per chunk): the
/// rule of kernels/cpu/attention_block.h's visible_keys, element by element.
LLMP_HD bool sees(const cpu::BlockPairs& p, int i, int j, int c) {
  const cpu::ChunkPair k = p.kind[i / c][j / c];
  return k == cpu::ChunkPair::kFull || (k == cpu::ChunkPair::kDiagonal && j % c <= i % c);
}

/// Whether any query of [i0, i1) sees any key of [j0, j1) (all rows < 2c): per chunk pair met
/// by the tile pair, a full pair always, a diagonal pair when the tile's first key of that chunk
/// is not after its last query of that chunk (offsets within the chunk).
LLMP_HD bool tile_sees(const cpu::BlockPairs& p, int i0, int i1, int j0, int j1, int c) {
  for (int qc = 0; qc < 2; ++qc)
    for (int kc = 0; kc < 2; ++kc) {
      const int a0 = i0 > qc * c ? i0 : qc * c, a1 = i1 < (qc + 1) * c ? i1 : (qc + 1) * c;
      const int b0 = j0 > kc * c ? j0 : kc * c, b1 = j1 < (kc + 1) * c ? j1 : (kc + 1) * c;
      if (a0 >= a1 || b0 >= b1) continue;  // the tile pair misses this chunk pair
      const cpu::ChunkPair k = p.kind[qc][kc];
      if (k == cpu::ChunkPair::kFull) return true;
      if (k == cpu::ChunkPair::kDiagonal && b0 - kc * c <= a1 - 1 - qc * c) return true;
    }
  return false;
}

}  // namespace cuda
}  // namespace llmp
