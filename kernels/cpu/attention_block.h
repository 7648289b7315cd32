// Blockwise attention with an online softmax: the per-step kernels of ring attention
// (common/cp/ring_attention.h), one call per ring step over every (b, h).
//
// Papers: the online softmax of Milakov & Gimelshein 2018 and FlashAttention (Dao et al. 2022,
// Algorithm 1: running max m, running sum l, unnormalised output O); the backward of
// FlashAttention-2 (Dao 2023, Algorithm 2: P recomputed from lse, D = rowsum(dO ⊙ O)); the ring
// of Liu, Zaharia & Abbeel 2023 (§3) that hands these kernels one key/value block per step.
//
// Layout. Every operand is a strided (B, Tl, ·) buffer as the ring core holds it: row i of
// sequence b starts at p + (b·Tl + i)·ld, and head h owns the hs floats at channel h·hs of each
// row. So q may point at the q columns of qkv (B,Tl,3A) with ld = 3A, k and v at the k and v
// columns of a ring block (B,Tl,2A) with ld = 2A, o at out (B,Tl,A) with ld = A: no copy into a
// (B,H,Tl,hs) layout. m, l, lse, D are (B,H,Tl), contiguous.
//
// Chunks. The Tl rows of queries and of keys are two chunks of c = Tl/2 rows each (the causal
// split of ring_attention.h); `pairs.kind[qi][ki]` says how query chunk qi meets key chunk ki:
//   kSkip      every key after every query: not computed
//   kDiagonal  the same chunk of the sequence: row o sees keys 0..o of the chunk (causal mask)
//   kFull      every key before every query: all c keys seen
// A whole causal sequence of Tl rows is {{kDiagonal, kSkip}, {kFull, kDiagonal}}.
//
// Forward of one step, per (b, h) and query row i (keys j visible to i in this block):
//   S_ij = q_i·k_j / √hs
//   m'   = max(m_i, max_j S_ij)            running max
//   P~_ij = exp(S_ij − m')                 unnormalised probabilities
//   l_i  = e^(m_i − m') l_i + Σ_j P~_ij    running sum, rescaled to the new max
//   O_i  = e^(m_i − m') O_i + Σ_j P~_ij v_j
//   m_i  = m'
// after the last step: out_i = O_i / l_i, lse_i = m_i + log l_i (attention_block_finalize).
// Backward of one step (D_i = dO_i·out_i once, attention_block_rowdot):
//   P_ij = exp(S_ij − lse_i);  dV_j += Σ_i P_ij dO_i;  dP_ij = dO_i·v_j;
//   dS_ij = P_ij (dP_ij − D_i) / √hs;  dQ_i += Σ_j dS_ij k_j;  dK_j += Σ_i dS_ij q_i
//
// FLOPs (flops.h): per computed chunk pair and (b, h), 2c²hs per product on the full c × c
// square (the diagonal's masked half included): two products forward (S, P~V), five backward
// (S, dP, dV, dQ, dK). attention_block_flops gives the count of one call.
//
// Glossary: B sequences, H heads, hs head size, Tl rows (queries and keys) of a block, c = Tl/2,
// ld a row stride in floats.
#pragma once

#include <cstdint>

namespace llmp {
namespace cpu {

/// How a (query chunk, key chunk) pair is computed (see the file comment).
enum class ChunkPair : int8_t { kSkip = 0, kDiagonal = 1, kFull = 2 };

/// The four chunk pairs of one step: kind[query chunk][key chunk], each 0 or 1.
struct BlockPairs {
  ChunkPair kind[2][2];
};

/// Keys of a pair that row o of the query chunk sees: 0 (skip), o + 1 (diagonal), c (full).
inline int visible_keys(ChunkPair k, int o, int c) {
  return k == ChunkPair::kSkip ? 0 : k == ChunkPair::kDiagonal ? o + 1 : c;
}

/// FLOPs of one call: `products` (2 forward, 5 backward) · 2c²hs per computed pair and (b, h).
inline int64_t attention_block_flops(const BlockPairs& pairs, int B, int H, int Tl, int hs,
                                     int products) {
  const int64_t c = Tl / 2;
  int64_t computed = 0;
  for (const auto& row : pairs.kind)
    for (ChunkPair k : row) computed += k != ChunkPair::kSkip;
  return computed * B * H * products * 2 * c * c * hs;
}

/// One forward step: m, l (B,H,Tl) and the unnormalised o (rows ld_o) updated with the keys and
/// values k, v (rows ld_kv) of one block for the queries q (rows ld_q). Start with m = −∞, l = 0,
/// o = 0. scores: Tl·Tl floats of workspace (one (b, h) at a time). Tl even.
void attention_block_forward(float* o, int ld_o, float* m, float* l, float* scores,
                             const float* q, int ld_q, const float* k, const float* v, int ld_kv,
                             int B, int H, int Tl, int hs, BlockPairs pairs);

/// out = o / l in place (rows ld_o) and lse = m + log l (B,H,Tl), after the last forward step.
void attention_block_finalize(float* o, int ld_o, float* lse, const float* m, const float* l,
                              int B, int H, int Tl, int hs);

/// D (B,H,Tl) = rowsum(dO ⊙ out) per head: dout and out both with rows ld_o.
void attention_block_rowdot(float* D, const float* dout, const float* out, int ld_o, int B,
                            int H, int Tl, int hs);

/// One backward step: dq (rows ld_q, the same stride as q) += dS K; dk, dv (rows ld_dkv) +=
/// dSᵀ Q, Pᵀ dO, with P recomputed from lse and D of the forward. P, dS: Tl·Tl floats of
/// workspace each. dout has rows ld_o.
void attention_block_backward(float* dq, float* dk, float* dv, int ld_dkv, float* P, float* dS,
                              const float* q, int ld_q, const float* k, const float* v,
                              int ld_kv, const float* dout, int ld_o, const float* lse,
                              const float* D, int B, int H, int Tl, int hs, BlockPairs pairs);

/// dst row i [0, cols) = src row i [0, cols) for i < rows (row strides ld_dst, ld_src, in
/// floats): the ring's K|V packing and the dK|dV unpacking, a 2-D copy.
void copy_columns(float* dst, int ld_dst, const float* src, int ld_src, int64_t rows, int cols);

}  // namespace cpu
}  // namespace llmp
