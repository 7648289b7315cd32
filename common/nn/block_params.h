// The one table of a transformer block's tensors: names, shapes and how tensor parallelism
// splits them. GPTLayout (gpt_layout.cc) builds its "h.<l>.*" entries from kBlockParams, and the
// block's sub-layers (attention.cc, mlp.cc) find their weights with block_params(), which walks
// the same table: the three cannot drift apart. Shapes are (in, out) for weights, as in HF GPT-2's
// Conv1D.
//
// A block's shapes come from a BlockShape, so that a tensor-parallel rank holds the same tensors
// with smaller dimensions (Megatron-LM, Shoeybi et al. 2019, §3):
//
//   tensor              shape        t = 1       rank r of t                 split
//   ln_1, ln_2 (w, b)   (C)          (C)         (C)                         replicated
//   attn.c_attn.weight  (C, qkv)     (C, 3C)     (C, 3C/t): its heads' q|k|v  column-parallel by heads
//   attn.c_attn.bias    (qkv)        (3C)        (3C/t)                      column-parallel by heads
//   attn.c_proj.weight  (attn, C)    (C, C)      (C/t, C): rows of its heads row-parallel
//   attn.c_proj.bias    (C)          (C)         (C), added once after g     replicated
//   mlp.c_fc.weight     (C, ffn)     (C, 4C)     (C, 4C/t)                   column-parallel
//   mlp.c_fc.bias       (ffn)        (4C)        (4C/t)                      column-parallel
//   mlp.c_proj.weight   (ffn, C)     (4C, C)     (4C/t, C)                   row-parallel
//   mlp.c_proj.bias     (C)          (C)         (C), added once after g     replicated
//
// A block holds 12C² + 13C parameters; a tensor-parallel rank 12C²/t + 7C/t + 6C.
//
// Glossary: C channels, H heads, hs = C/H head size, t tensor-parallel ranks, r rank,
// attn = (H/t)·hs = C/t attention columns per rank, qkv = 3·attn, ffn = 4C/t.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace llmp {

/// A block's dimensions on one rank: the whole block (t = 1) or a tensor-parallel slice.
struct BlockShape {
  int C = 0;          ///< channels of the residual stream (never split)
  int heads = 0;      ///< attention heads held: H/t
  int head_size = 0;  ///< hs = C/H
  int ffn = 0;        ///< MLP hidden width held: 4C/t
  int attn() const { return heads * head_size; }  ///< C/t: q (or k, or v) columns held
  int qkv() const { return 3 * attn(); }          ///< 3C/t
};

/// A dimension of a block tensor, in BlockShape's terms (kOne: the tensor is a vector).
enum class Dim { kOne, kC, kAttn, kQKV, kFFN };

/// How tensor parallelism splits a tensor of the whole model over the t ranks.
enum class Split {
  kReplicated,  ///< every rank holds all of it
  kColumns,     ///< column-parallel: rank r holds output columns [r·n/t, (r+1)·n/t)
  kQKVColumns,  ///< by heads: rank r holds columns [j·C + r·C/t, j·C + (r+1)·C/t), j = q, k, v
  kRows,        ///< row-parallel: rank r holds input rows [r·n/t, (r+1)·n/t) (also wte: vocab)
  kExpert,      ///< an expert's tensor: held whole by the expert-parallel rank of its expert
};

/// One entry of a block: name suffix after "h.<l>.", its shape and its split.
struct BlockParamDef {
  const char* suffix;
  Dim rows;  ///< kOne for a vector
  Dim cols;
  Split split;
};

/// The block's parameters in buffer order.
// clang-format off
inline constexpr std::array<BlockParamDef, 12> kBlockParams = {{
    {"ln_1.weight",        Dim::kOne,  Dim::kC,    Split::kReplicated},
    {"ln_1.bias",          Dim::kOne,  Dim::kC,    Split::kReplicated},
    {"attn.c_attn.weight", Dim::kC,    Dim::kQKV,  Split::kQKVColumns},  // (C, qkv)
    {"attn.c_attn.bias",   Dim::kOne,  Dim::kQKV,  Split::kQKVColumns},  // (qkv)
    {"attn.c_proj.weight", Dim::kAttn, Dim::kC,    Split::kRows},        // (attn, C)
    {"attn.c_proj.bias",   Dim::kOne,  Dim::kC,    Split::kReplicated},  // (C)
    {"ln_2.weight",        Dim::kOne,  Dim::kC,    Split::kReplicated},
    {"ln_2.bias",          Dim::kOne,  Dim::kC,    Split::kReplicated},
    {"mlp.c_fc.weight",    Dim::kC,    Dim::kFFN,  Split::kColumns},     // (C, ffn)
    {"mlp.c_fc.bias",      Dim::kOne,  Dim::kFFN,  Split::kColumns},     // (ffn)
    {"mlp.c_proj.weight",  Dim::kFFN,  Dim::kC,    Split::kRows},        // (ffn, C)
    {"mlp.c_proj.bias",    Dim::kOne,  Dim::kC,    Split::kReplicated},  // (C)
}};
// clang-format on

/// The tensors of a mixture-of-experts block (moe.h): the first 8 of kBlockParams (ln_1, the
/// attention, ln_2), then the router, then each expert e this rank holds, named by its global
/// index e (so checkpoints move between expert-parallel sizes):
///   mlp.router.weight               (C,E)        replicated
///   mlp.experts.<e>.c_fc.weight     (C,4C)       held whole by expert e's rank
///   mlp.experts.<e>.c_fc.bias       (4C)
///   mlp.experts.<e>.c_proj.weight   (4C,C)
///   mlp.experts.<e>.c_proj.bias     (C)
/// A block holds 4C² + 8C + CE + E·(8C² + 5C); an expert-parallel rank E/ep of the experts.
inline constexpr std::size_t kMoeSharedParams = 8;  ///< kBlockParams[0, 8): ln_1, attention, ln_2
inline constexpr std::array<BlockParamDef, 4> kExpertParams = {{
    {"c_fc.weight",   Dim::kC,   Dim::kFFN, Split::kExpert},
    {"c_fc.bias",     Dim::kOne, Dim::kFFN, Split::kExpert},
    {"c_proj.weight", Dim::kFFN, Dim::kC,   Split::kExpert},
    {"c_proj.bias",   Dim::kOne, Dim::kC,   Split::kExpert},
}};

/// Size of dimension `d` in `s`.
inline int64_t dim_size(Dim d, const BlockShape& s) {
  switch (d) {
    case Dim::kOne: return 1;
    case Dim::kC: return s.C;
    case Dim::kAttn: return s.attn();
    case Dim::kQKV: return s.qkv();
    case Dim::kFFN: return s.ffn;
  }
  return 0;
}

/// Shape of entry `d` in `s`: {rows, cols} for a weight, {cols} for a vector.
inline std::vector<int64_t> block_param_shape(const BlockParamDef& d, const BlockShape& s) {
  if (d.rows == Dim::kOne) return {dim_size(d.cols, s)};
  return {dim_size(d.rows, s), dim_size(d.cols, s)};
}

/// Typed pointers to one block's parameters (or gradients) starting at `base`.
template <typename F>
struct BlockParams {
  F *ln1_w, *ln1_b;        ///< (C), (C)
  F *attn_w, *attn_b;      ///< (C,qkv), (qkv)
  F *proj_w, *proj_b;      ///< (attn,C), (C)
  F *ln2_w, *ln2_b;        ///< (C), (C)
  F *fc_w, *fc_b;          ///< (C,ffn), (ffn)
  F *fcproj_w, *fcproj_b;  ///< (ffn,C), (C)
};

/// Splits the unit starting at `base` following kBlockParams.
template <typename F>
BlockParams<F> block_params(F* base, const BlockShape& s) {
  std::array<F*, kBlockParams.size()> p{};
  int64_t off = 0;
  for (size_t i = 0; i < kBlockParams.size(); ++i) {
    p[i] = base + off;
    off += dim_size(kBlockParams[i].rows, s) * dim_size(kBlockParams[i].cols, s);
  }
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
}

}  // namespace llmp
