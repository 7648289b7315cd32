// flash_tiles.h on the host: `sees` is kernels/cpu/attention_block.h's visibility rule element by
// element, and `tile_sees` skips exactly the tile pairs without a visible element, for every one
// of the 81 chunk-pair kinds, sequence lengths whose chunks do and do not align with the tiles,
// and tiles of 16 and 64 rows (the kernels' 64 and a size that cuts every chunk).
#include "kernels/cuda/flash_tiles.h"

#include <gtest/gtest.h>

#include <vector>

namespace llmp {
namespace cuda {
namespace {

using cpu::ChunkPair;

std::vector<cpu::BlockPairs> every_pairs() {
  const ChunkPair kinds[3] = {ChunkPair::kSkip, ChunkPair::kDiagonal, ChunkPair::kFull};
  std::vector<cpu::BlockPairs> all;
  for (int n = 0; n < 81; ++n) {
    cpu::BlockPairs p;
    int r = n;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b, r /= 3) p.kind[a][b] = kinds[r % 3];
    all.push_back(p);
  }
  return all;
}

TEST(FlashTiles, SeesIsTheCpuKernelsVisibility) {
  for (const cpu::BlockPairs& p : every_pairs())
    for (int Tl : {2, 6, 34, 80}) {
      const int c = Tl / 2;
      for (int i = 0; i < Tl; ++i)
        for (int j = 0; j < Tl; ++j) {
          // attention_block.h: query o of chunk qi sees keys [0, visible_keys) of chunk kj.
          const bool cpu_sees = j % c < cpu::visible_keys(p.kind[i / c][j / c], i % c, c);
          ASSERT_EQ(sees(p, i, j, c), cpu_sees) << "Tl=" << Tl << " i=" << i << " j=" << j;
        }
    }
}

TEST(FlashTiles, TileSeesSkipsExactlyTheEmptyTilePairs) {
  int64_t skipped = 0, kept = 0;
  for (const cpu::BlockPairs& p : every_pairs())
    for (int Tl : {2, 34, 80, 130})
      for (int tile : {16, kFlashTile}) {
        const int c = Tl / 2;
        for (int i0 = 0; i0 < Tl; i0 += tile)
          for (int j0 = 0; j0 < Tl; j0 += tile) {
            const int i1 = i0 + tile < Tl ? i0 + tile : Tl, j1 = j0 + tile < Tl ? j0 + tile : Tl;
            bool any = false;
            for (int i = i0; i < i1; ++i)
              for (int j = j0; j < j1; ++j) any = any || sees(p, i, j, c);
            ASSERT_EQ(tile_sees(p, i0, i1, j0, j1, c), any)
                << "Tl=" << Tl << " tile=" << tile << " i0=" << i0 << " j0=" << j0;
            (any ? kept : skipped) += 1;
          }
      }
  EXPECT_GT(skipped, 0);
  EXPECT_GT(kept, 0);
}

}  // namespace
}  // namespace cuda
}  // namespace llmp
