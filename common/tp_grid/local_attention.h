// Attention as the multi-dimensional tensor-parallel walks (2D/2.5D: common/tp2d/gpt_2p5d.cc,
// 3D: common/tp3d/gpt_3d_block.cc) run it: local to the rank, which holds whole sequences of
// its H/q heads (their q|k|v columns), so no communication. One place for the three ways it can
// keep what its backward needs:
//   materialized  P = softmax(QKᵀ/√hs) (Bl, H, T, T) kept (kernels/cpu/attention.h);
//   selective     P dropped after the forward and made again from q and k in the backward
//                 (attention_probs; counted in RecomputeMeter, common/nn/recompute.h);
//   flash         only each row's log-sum-exp lse (Bl, H, T) kept, P made again block by block
//                 (common/nn/flash_attention.h).
//
// Glossary: Bl sequences, T positions, H this rank's heads, A = H·hs this rank's channels.
#pragma once

#include <cstdint>

#include "common/nn/flash_attention.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// What a local attention's forward keeps: P, or (flash) lse; neither under selective
/// recomputation until the backward makes P again.
struct LocalAttentionKeep {
  Tensor att;  ///< (Bl, H, T, T) f32 probabilities (materialized)
  Tensor lse;  ///< (Bl, H, T) f32 log-sum-exp (flash)
  /// Bytes kept: P's, or lse's, or 0 (dropped).
  int64_t nbytes() const { return att.nbytes() + lse.nbytes(); }
};

/// atty (Bl·T, A) = causal attention of qkv (Bl·T, 3A) over H heads, on qkv's device, f32.
/// Keeps P in keep->att (dropped again when `drop_probs`: selective recomputation), or with
/// `method` flash lse in keep->lse. Throws as flash_attention_forward (odd T).
void local_attention_forward(const Tensor& qkv, const Tensor& atty, int Bl, int T, int H,
                             AttentionMethod method, bool drop_probs, LocalAttentionKeep* keep);

/// dqkv (Bl·T, 3A), OVERWRITTEN, from datty and the forward's qkv, atty and `keep`: flash's
/// backward with keep->lse, else the materialized one with keep->att, made again first (and
/// counted) when the forward dropped it.
void local_attention_backward(const Tensor& dqkv, const Tensor& datty, const Tensor& qkv,
                              const Tensor& atty, LocalAttentionKeep* keep, int Bl, int T, int H);

}  // namespace llmp
