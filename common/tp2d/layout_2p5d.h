// Layout2p5d: which part of every GPT-2 tensor rank (h,i,j) of the d×q×q grid holds, in its own
// flat buffer, and the mapping to and from the whole model's flat buffer (GPTLayout(cfg), the
// GPT-2 names and order every stage's checkpoints use).
//
//   tensor (whole shape)           rank (h,i,j) holds                         class
//   wte (V,C)                      rows block i (vocab), columns block j       matrix
//   wpe (ctx,C)                    all rows, columns block j                   vector
//   ln_1/ln_2/ln_f w, b (C)        block j                                     vector
//   attn.c_attn.weight (C,3C)      rows block i; columns: q, k and v of heads  matrix
//                                  j·H/q .. (j+1)·H/q-1 ([q_j | k_j | v_j])
//   attn.c_attn.bias (3C)          [q_j | k_j | v_j]                           vector
//   attn.c_proj.weight (C,C)       rows block i, columns block j               matrix
//   mlp.c_fc.weight (C,4C)         rows block i, columns block j               matrix
//   mlp.c_proj.weight (4C,C)       rows block i, columns block j               matrix
//   c_proj/c_fc biases             block j                                     vector
// Matrices are replicated over depth h (Tesseract); vectors over i and h (the column group and
// depth). The local buffer is [vectors | matrices], each class in GPT-2 order, so that the
// gradient all_reduces are one call per class:
//   Ψ_vec = (ctx·C + 13LC + 2C)/q,   Ψ_mat = (VC + 12LC²)/q²,   Ψ_local = Ψ_vec + Ψ_mat.
//
// Glossary: q grid side, (i,j) row and column, V vocab, ctx positions, C channels, H heads,
// L layers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/optim/adamw.h"

namespace llmp {

/// One tensor's part on this rank: rows [r0, r0+rows) of the whole (R, Cw) tensor and `cols`
/// columns (a block j of width cols, or for c_attn its q, k, v parts of width cols/3 each).
struct Part2p5d {
  std::string name;
  int64_t global_offset = 0, R = 1, Cw = 0;  ///< whole tensor: offset in GPTLayout(cfg), shape
  int64_t r0 = 0, rows = 1, c0 = 0, cols = 0;
  bool qkv = false;       ///< c_attn: columns [c0, c0+cols/3) of each of q, k, v
  bool matrix = false;    ///< replicated over depth only (else also over the column group)
  bool decayed = false;   ///< ≥ 2 dimensions (nanoGPT's weight-decay rule)
  int64_t offset = 0;     ///< in this rank's flat buffer
  int64_t numel() const { return rows * cols; }
  /// Column of the whole tensor for local column c.
  int64_t global_col(int64_t c) const;
};

class Layout2p5d {
 public:
  /// Throws std::invalid_argument naming the values when q does not divide H, C, 4C or V.
  Layout2p5d(const GPTConfig& cfg, int q, int i, int j);
  const std::vector<Part2p5d>& parts() const { return parts_; }
  /// Throws std::out_of_range naming `name` when absent.
  const Part2p5d& at(const std::string& name) const;
  int64_t num_params() const { return vec_ + mat_; }
  int64_t num_vector_params() const { return vec_; }  ///< first in the buffer
  int64_t num_matrix_params() const { return mat_; }  ///< after the vectors
  /// Rank's part of the whole model's flat buffer `full` (Ψ floats) into `local`.
  void copy_from_full(const float* full, float* local) const;
  /// Writes this rank's parts into their places in `full` (other elements untouched).
  void copy_to_full(const float* local, float* full) const;
  /// The elements of the local buffer that `rule` decays (for AdamW).
  std::vector<ElementRange> decay_ranges(DecayRule rule) const;
  /// Whether this rank counts `p` (one of parts()) in a sum over one depth layer's q×q grid that
  /// must see every element of the model once, as --clip_grad's ‖g‖² does: a matrix block (held
  /// by this rank alone in the layer) always, a vector block (held by the column group, every i
  /// of one j) on row i = 0 only. The depth layers are replicas: the caller counts layer 0.
  bool counts_once(const Part2p5d& p) const { return p.matrix || i_ == 0; }

 private:
  std::vector<Part2p5d> parts_;
  std::map<std::string, size_t> index_;
  int64_t vec_ = 0, mat_ = 0;
  int i_ = 0;
};

/// "" when q = √(P/d) fits cfg's model, else one line naming the values.
std::string tp2d_model_error(const GPTConfig& cfg, int q);

}  // namespace llmp
