// TileGatherer: ZeRO-3 with memory-centric tiling (ZeRO-Infinity: Rajbhandari et al. 2021,
// "ZeRO-Infinity: Breaking the GPU Memory Wall for Extreme Scale Deep Learning", §5.1.3).
//
// UnitGatherer (unit_gatherer.h) all-gathers a whole block, 12C² + 13C parameters, before the
// block computes. A TileGatherer gathers a block in pieces instead:
//
//   the rest   the block's LayerNorms and biases (13C elements, block_rest_ranges), gathered
//              and prefetched like a unit: the walk's ParamSource::get(1+l) hands it out;
//   the tiles  each of the four large linears (c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) in k
//              tiles, all-gathered one at a time WHILE the block computes, when the layer asks for
//              them (WeightTiles, tiled_linear.h), and freed right after the tile's product:
//              the forward gathers column tiles W[:, i·OC/k ..), the backward row tiles
//              W[i·C/k .., :]. No tile is prefetched: one tile is alive at a time.
//
// Units 0 (embeddings) and L+1 (ln_f) are gathered whole, as UnitGatherer does. The tiles of a
// pass partition the weight, and the rest and the four weights partition the unit, so every
// block element is all-gathered once in the forward and once in the backward, as before: the
// bytes sent per step do not change (the number of collectives does: 1 + 4k per block step
// instead of 1). The gathered weights of the largest linear (c_fc or mlp.c_proj, 4C² elements)
// peak at 4C²/k.
//
// A piece is a set of flat ranges of the parameter buffer (one for a row tile or a unit; C
// strided rows for a column tile; eight vectors for a rest). Each rank packs, in flat order, the
// elements of its shard that lie in the piece (kOther scratch, unless they are one contiguous run
// of the shard), and one all_gather_v, counts = Σ over the ranges of ShardLayout::split_range,
// puts all of them in flat order: for a column tile that is the packed (C, OC/k) tile itself.
//
// Memory: a gathered piece is counted as MemCategory::kParameters from allocation to release;
// 16-bit pieces are widened to an fp32 copy (kOther), as in UnitGatherer.
//
// Glossary: N ranks, S = ⌈Ψ/N⌉ shard size, C channels, k tile factor, n_u elements of unit u,
// rest = a block's 13C LayerNorm and bias elements.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/nn/tiled_linear.h"
#include "common/nn/unit_runner.h"
#include "common/train/dp_util.h"

namespace llmp {

class TileGatherer : public ParamSource, public WeightTiles {
 public:
  /// `shard`: this rank's S parameters; `k` ≥ 1 tiles per linear (k must divide C, 3C, 4C when
  /// the tiles are to be equal; any k ≤ C works). References must outlive the gatherer.
  TileGatherer(const GPTLayout& layout, const ShardLayout& shards, ProcessGroup& dp,
               const Tensor& shard, int k);
  /// Waits for gathers still in flight.
  ~TileGatherer() override;

  /// Unit u in fp32: a block's rest (block_rest_ranges packed, 13C), or unit 0 / L+1 whole.
  const float* get(int u) override;
  /// Prefetches the pieces of steps k and k+1; notes the block step k computes (its tiles).
  void before_step(const std::vector<WalkStep>& steps, size_t k) override;
  /// Frees the pieces of step k that step k+1 does not read, and any tile left alive.
  void after_step(const std::vector<WalkStep>& steps, size_t k) override;

  int tile_factor() const override { return k_; }
  /// Collective: all-gathers columns tile_range(OC, k, i) of linear w of the block computing,
  /// packed (C, OC/k). sends (N-1)/N · b·C·OC/k. Fails when no block step is running.
  const float* columns(BlockLinear w, int i) override;
  /// Collective: all-gathers rows tile_range(C, k, i), (C/k, OC). sends (N-1)/N · b·C·OC/k.
  const float* rows(BlockLinear w, int i) override;
  /// Frees the tile handed out last.
  void release_tile() override;

  /// The most tile elements alive at once since construction (4C²/k for the tiny, mini and gpt2
  /// blocks when k divides C: one c_fc or mlp.c_proj tile).
  int64_t peak_tile_numel() const { return peak_tile_numel_; }
  /// Tiles all-gathered since construction.
  int tile_gathers() const { return tile_gathers_; }
  /// all-gathers of unit u (of a block: its rest) since construction, tiles not counted.
  int gathers(int u) const;

 private:
  struct Piece {
    Tensor params;                  // gathered, kParameters, shard dtype
    Tensor widened;                 // fp32 copy of a 16-bit piece, kOther
    Tensor send;                    // this rank's packed part, kOther (when not contiguous)
    std::shared_ptr<Work> pending;  // the all_gather_v in flight, null once waited
  };
  /// Starts the all_gather_v of the flat elements in `ranges` (sorted, disjoint).
  Piece start(const std::vector<TileRange>& ranges);
  /// Waits for the piece and returns it in fp32.
  const float* ready(Piece& p);
  /// Flat ranges of what get(u) hands out.
  std::vector<TileRange> unit_ranges(int u) const;
  void prefetch(int u);
  void release(int u);
  /// Hands out tile (flat ranges) of the block computing.
  const float* tile(const std::vector<TileRange>& ranges);
  int64_t weight_offset(BlockLinear w) const;  // flat offset of w in the block computing

  const GPTLayout& layout_;
  const ShardLayout& shards_;
  ProcessGroup& dp_;
  Tensor shard_;
  int k_;
  int block_unit_ = -1;  // the block whose step is running (1+l), -1 outside block steps
  std::map<int, Piece> held_;
  std::vector<Piece> tiles_;  // alive tiles (one, unless a caller forgets release_tile)
  int64_t tile_numel_ = 0, peak_tile_numel_ = 0;
  int tile_gathers_ = 0;
  std::map<int, int> gathers_;
};

}  // namespace llmp
