// Where each GPT-2 tensor's block sits on a rank (i,j,l) of the 3D cube (cube.h), and the map
// to and from the whole model's flat buffer (GPTLayout(cfg) order, GPT-2 names), which is what
// makes checkpoints interchangeable with every other stage.
//
// Two activation layouts alternate (Bian et al. 2021, §3.2; the batch split by sequences so
// attention sees whole sequences):
//   layout A (residual stream): sequences sub-block i·q + j of q², channels block l (C/q);
//   layout B (after c_attn, c_fc, the head): sequences sub-block i·q + l, columns block j.
// A weight W (K,N) of an A→B linear (c_attn, c_fc) is cut into the q×q block W_lj (rows block l
// of K, columns block j of N), and that block into q pieces by ROWS: piece i = rows
// [l·K/q + i·K/q², +K/q²) at rank (i,j,l), so the all_gather over the i-axis concatenates the
// pieces into W_lj row-major. A B→A linear (attn.c_proj, mlp.c_proj) holds W_jl the same way.
// (Colossal-AI cuts the block by columns; by rows the gathered block needs no reordering.)
//
//   tensor              global     rank (i,j,l) holds                              layout
//   wte (V,C)           (V,C)      vocab [j·V/q + i·V/q², +V/q²) × channels l     head (W = wteᵀ)
//   wpe (ctx,C)         (ctx,C)    all positions × channels l                      A vector
//   ln_1/ln_2/ln_f w,b  (C)        channels l                                      A vector
//   attn.c_attn.weight  (C,3C)     rows piece i of block l × q|k|v of heads block j A→B
//   attn.c_attn.bias    (3C)       q|k|v of heads block j                          B vector
//   attn.c_proj.weight  (C,C)      rows piece i of block j × channels l            B→A
//   attn.c_proj.bias    (C)        channels l                                      A vector
//   mlp.c_fc.weight     (C,4C)     rows piece i of block l × columns block j       A→B
//   mlp.c_fc.bias       (4C)       columns block j                                 B vector
//   mlp.c_proj.weight   (4C,C)     rows piece i of block j × channels l            B→A
//   mlp.c_proj.bias     (C)        channels l                                      A vector
// "q|k|v of heads block j": the 3C/q columns {p·C + j·C/q + c : p = 0,1,2, c < C/q}, so the
// local qkv is [q | k | v] of H/q whole heads and attention runs locally.
// Ψ_r = (VC + 12LC²)/q³ + (ctx·C + 13LC + 2C)/q floats per rank.
//
// Glossary: q cube side, V vocab, C channels, L layers, ctx positions, K,N a weight's (in,out).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/nn/gpt.h"

namespace llmp {

/// Which plane a vector's gradient is all-reduced over (the ranks holding the same block of it).
enum class Replication { kNone, kPlaneL, kPlaneJ };

/// One GPT-2 tensor's block on this rank: the (rows × cols) sub-matrix of the global tensor
/// (rows, cols are global indices; a vector has the one row 0), row-major at `offset`.
struct Param3d {
  std::string name;
  int64_t offset = 0, numel = 0;  ///< in this rank's flat buffer
  int64_t global_offset = 0, global_cols = 0;
  std::vector<int64_t> rows, cols;
  Replication replication = Replication::kNone;
};

class Layout3d {
 public:
  /// Rank (i,j,l) of a q-cube. Throws std::invalid_argument naming the values unless q | H,
  /// q² | C and q² | V (the weight pieces, heads and vocabulary pieces must be whole).
  Layout3d(const GPTConfig& cfg, int q, int i, int j, int l);
  const std::vector<Param3d>& params() const { return params_; }
  int64_t num_params() const { return total_; }
  /// Offset of tensor `name` in this rank's buffer; throws std::out_of_range naming it.
  int64_t offset(const std::string& name) const;
  /// local (num_params()) ← this rank's blocks of `full` (Ψ floats, GPTLayout(cfg) order).
  void copy_from_full(const float* full, float* local) const;
  /// full ← this rank's blocks (replicated ones are written whole by each holder).
  void copy_to_full(const float* local, float* full) const;
  /// Whether this rank counts `p` (one of params()) in a sum over the cube that must see every
  /// element of the model once, as --clip_grad's ‖g‖² does: a weight piece (held by this rank
  /// alone) always, a replicated vector block on its plane's first rank only: kPlaneL (every i,j
  /// of one l) at i = j = 0, kPlaneJ (every i,l of one j) at i = l = 0.
  bool counts_once(const Param3d& p) const;

 private:
  std::vector<Param3d> params_;
  int64_t total_ = 0;
  int i_ = 0, j_ = 0, l_ = 0;
};

/// The first problem with `cfg` on a q-cube as one line ("" when fine): q | H, q² | C, q² | V.
std::string layout3d_error(const GPTConfig& cfg, int q);

}  // namespace llmp
