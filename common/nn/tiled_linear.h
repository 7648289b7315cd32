// Memory-centric tiling (ZeRO-Infinity: Rajbhandari et al. 2021, "ZeRO-Infinity: Breaking the
// GPU Memory Wall for Extreme Scale Deep Learning", §5.1.3): a linear layer too large to gather
// whole is computed as k tiles one after another; each tile's weights are fetched, used and
// released before the next, so the layer's gathered weights peak at 1/k of the layer.
//
// The four large linears of a block (c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) read their
// weights through a WeightTiles source when the GPT has one (GPT::with_weight_tiles; ZeRO-3's
// TileGatherer all-gathers each tile from the shards); everything else of the block (LayerNorms
// and biases: its "rest", 13C elements at t = 1) comes whole from the unit, as before.
//
// Bit-identical results. A linear y = x @ W, W (C,OC) row-major, has three sums:
//   forward  y[n,j]  = Σ_c x[n,c] W[c,j]     sums over C (W's rows)
//   backward dx[n,c] = Σ_j dy[n,j] W[c,j]    sums over OC (W's columns)
//            dW[c,j] = Σ_n x[n,c] dy[n,j]    sums over N (never needs W: not tiled at all)
// Cutting W along the dimension a product sums over splits that sum into partial sums added in
// another order (another rounding). So the forward tiles W by COLUMNS (y[:, cols] has each of its
// sums whole) and the backward by ROWS (dx[:, rows] likewise): neither sum is ever split.
//
// That is necessary, not sufficient, with a blocked GEMM. Eigen computes a row-major product as
// its transpose, so W's tiled dimension is the GEMM's "m", cut into micro-panels of mr rows (24
// floats with AVX2: 3 packets of 8); the rows past the last whole panel go through smaller
// kernels (2-, 1-packet, scalar) that accumulate in another order (the 1-packet kernel keeps two
// accumulators, even and odd k, and adds them at the end). A row's rounding therefore depends on
// which kernel it lands in, and a tile of 64 rows puts rows 48..63 in a 2-packet kernel where the
// whole product had them in a 3-packet one: measured, 454 of the 8,192 outputs of (64,128) @
// (128,128) in two column tiles differed in their last bits (tiled_linear_test). The fix used
// here: each tile is computed inside its panel window, the smallest range of whole panels
// around it (or up to the end of the dimension for the tile holding the last, partial panel),
// with the rows of the other tiles set to zero and their outputs discarded. Every row then meets
// the same kernel as in the whole product and the results are bit-identical (tiled_linear_test:
// 240 shapes; 1,248 in a wider sweep when written, C up to 768, k up to 16). The window is
// scratch (MemCategory::kOther, at most 2(mr-1) rows more than the tile), absent when tiles are
// whole panels (C/k a multiple of 24).
//
// Glossary: N rows (= B·T), C input features, OC output features, k tiles (tile factor),
// mr the GEMM's micro-panel rows, rest a block's LayerNorm and bias elements.
#pragma once

#include <cstddef>  // size_t, which block_params.h uses
#include <cstdint>
#include <vector>

#include "common/nn/block_params.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

/// The four large linears of a block, in kBlockParams order.
enum class BlockLinear { kCAttn = 0, kAttnProj = 1, kFc = 2, kFcProj = 3 };
inline constexpr int kBlockLinears = 4;

/// Index in kBlockParams of the linear's weight (2, 4, 8, 10).
int block_linear_param(BlockLinear w);
/// Its shape (rows = in, cols = out) in `s`: c_attn (C,qkv), attn.c_proj (attn,C), c_fc (C,ffn),
/// mlp.c_proj (ffn,C).
void block_linear_shape(BlockLinear w, const BlockShape& s, int64_t* rows, int64_t* cols);
/// Element offset of the linear's weight inside its unit (block_params' layout).
int64_t block_linear_offset(BlockLinear w, const BlockShape& s);

/// A half-open range [begin, end) of indices.
struct TileRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const TileRange& o) const { return begin == o.begin && end == o.end; }
};
/// Tile i of k of a dimension of size D: [i·D/k, (i+1)·D/k) (equal tiles when k divides D).
TileRange tile_range(int64_t D, int k, int i);
/// Rows of one micro-panel of the CPU GEMM (Eigen's gebp mr for float: 24 with AVX2).
int matmul_panel_rows();
/// The panel window of tile t of a dimension of size D: from t.begin rounded down to a panel
/// boundary to t.end rounded up to one, or to D when t.end is past the last whole panel.
TileRange panel_window(TileRange t, int64_t D);

/// Where a block's large weights come from, one tile at a time. A tile stays valid until
/// release_tile(); the caller releases each tile before asking for the next (that is the point).
class WeightTiles {
 public:
  virtual ~WeightTiles() = default;
  /// k ≥ 1, tiles per linear.
  virtual int tile_factor() const = 0;
  /// Forward tile i of the block now computing: columns tile_range(OC, k, i) of the weight
  /// (C,OC), packed row-major (C, cols). Errors: the implementation's (e.g. no block computing).
  virtual const float* columns(BlockLinear w, int i) = 0;
  /// Backward tile i: rows tile_range(C, k, i) of the weight, (rows, OC) row-major.
  virtual const float* rows(BlockLinear w, int i) = 0;
  /// Frees the tile handed out last.
  virtual void release_tile() = 0;
};

/// y (N,OC) = x (N,C) @ W + b (bias may be nullptr), x and y as stored (kernel_ops.h Act: f32,
/// f16 or bf16). tiles == nullptr: ops.matmul_forward with W, exactly the untiled layer, on ops'
/// device (kernels/ops/kernel_ops.h). Otherwise W is ignored and read from `tiles` column tile by
/// column tile (through fp32 copies of 16-bit x and y, as the CPU's table makes them);
/// bit-identical to the untiled layer. Tiles are host memory: with tiles, ops must be the CPU's
/// (std::invalid_argument otherwise).
void linear_forward(KernelOps& ops, WeightTiles* tiles, BlockLinear w, Act y, ActIn x,
                    const float* W, const float* bias, int N, int C, int OC);
/// dx (N,C) = dy (N,OC) @ Wᵀ, OVERWRITTEN, dx and dy as stored. tiles == nullptr:
/// ops.matmul_backward_input with W; otherwise row tile by row tile (host only, as above),
/// bit-identical.
void linear_backward_input(KernelOps& ops, WeightTiles* tiles, BlockLinear w, Act dx, ActIn dy,
                           const float* W, int N, int C, int OC);

/// The ranges (within the unit, in order) of a block's rest: its vectors (LayerNorm weights and
/// biases, linear biases), everything but the four weights. 13C elements at t = 1.
std::vector<TileRange> block_rest_ranges(const BlockShape& s);
/// Σ of block_rest_ranges' sizes.
int64_t block_rest_numel(const BlockShape& s);
/// BlockParams over a packed rest buffer (block_rest_ranges concatenated); the four weights are
/// nullptr: a tiled block reads them from its WeightTiles.
BlockParams<const float> block_rest_params(const float* rest, const BlockShape& s);

}  // namespace llmp
