// Where each parameter of one transformer block sits inside the block's unit of the flat buffer.
//
// GPTLayout (gpt_layout.cc) builds its "h.<l>.*" entries from kBlockParams below, and the block's
// forward/backward (gpt_block.cc) find their weights with block_params(), which walks the same
// table: the two cannot drift apart. Shapes are (in, out) for weights, as in HF GPT-2's Conv1D.
//
// Glossary: C channels; a block has 12C² + 13C parameters.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace llmp {

/// One entry of a block: name suffix after "h.<l>." and its shape as multiples of C.
struct BlockParamDef {
  const char* suffix;
  int rows_per_c;  ///< rows = rows_per_c·C (0 for a vector)
  int cols_per_c;  ///< cols = cols_per_c·C
};

/// The block's parameters in buffer order.
// clang-format off
inline constexpr std::array<BlockParamDef, 12> kBlockParams = {{
    {"ln_1.weight", 0, 1},         {"ln_1.bias", 0, 1},
    {"attn.c_attn.weight", 1, 3},  {"attn.c_attn.bias", 0, 3},   // (C,3C), (3C)
    {"attn.c_proj.weight", 1, 1},  {"attn.c_proj.bias", 0, 1},   // (C,C), (C)
    {"ln_2.weight", 0, 1},         {"ln_2.bias", 0, 1},
    {"mlp.c_fc.weight", 1, 4},     {"mlp.c_fc.bias", 0, 4},      // (C,4C), (4C)
    {"mlp.c_proj.weight", 4, 1},   {"mlp.c_proj.bias", 0, 1},    // (4C,C), (C)
}};
// clang-format on

/// Shape of entry `d` for C channels: {rows, cols} for a weight, {cols} for a vector.
inline std::vector<int64_t> block_param_shape(const BlockParamDef& d, int C) {
  if (d.rows_per_c == 0) return {static_cast<int64_t>(d.cols_per_c) * C};
  return {static_cast<int64_t>(d.rows_per_c) * C, static_cast<int64_t>(d.cols_per_c) * C};
}

/// Typed pointers to one block's parameters (or gradients) starting at `base`.
template <typename F>
struct BlockParams {
  F *ln1_w, *ln1_b;        ///< (C), (C)
  F *attn_w, *attn_b;      ///< (C,3C), (3C)
  F *proj_w, *proj_b;      ///< (C,C), (C)
  F *ln2_w, *ln2_b;        ///< (C), (C)
  F *fc_w, *fc_b;          ///< (C,4C), (4C)
  F *fcproj_w, *fcproj_b;  ///< (4C,C), (C)
};

/// Splits the unit starting at `base` following kBlockParams.
template <typename F>
BlockParams<F> block_params(F* base, int C) {
  std::array<F*, kBlockParams.size()> p{};
  int64_t off = 0;
  for (size_t i = 0; i < kBlockParams.size(); ++i) {
    p[i] = base + off;
    int64_t n = 1;
    for (int64_t s : block_param_shape(kBlockParams[i], C)) n *= s;
    off += n;
  }
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
}

}  // namespace llmp
