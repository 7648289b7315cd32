// Lab ring_attention: the adapter header. The tests call ring_attention_forward() and nothing
// else, so you may organise your code (helpers, files) as you like behind this one function.
//
// Ring attention (Liu, Zaharia & Abbeel, "Ring Attention with Blockwise Transformers for
// Near-Infinite Context", 2023, §3) is how a sequence too long for one device is attended to
// without any device holding the whole sequence's keys and values or its T × T scores: the
// sequence is split over the ranks, each keeps its queries, and the key/value blocks travel
// around a ring while an online softmax (Milakov & Gimelshein 2018; FlashAttention, Dao et al.
// 2022, Algorithm 1) folds each block into running row statistics. The stage that trains a GPT
// with it is stages/ring_attention (common/cp/ring_attention.cc: many heads, the causally
// balanced split and the backward).
//
// Glossary: p = group.size() ranks, r = group.rank(), Tl rows per rank, T = p·Tl the sequence,
// hs the head size, g = r·Tl + i the global position of this rank's row i, src the rank whose
// block a step holds, m / l the running row max and sum of exponentials, lse = m + ln l.
#pragma once

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// Forward attention of one head over a sequence split over the ranks of `group`, by ring
/// attention: out = softmax(q kᵀ / √hs + mask) v for this rank's Tl query rows against all T keys.
///
/// Collective: every rank of `group` calls it, with the same Tl, hs and `causal`.
///
/// Data: q, k, v are host f32 (Tl, hs) tensors, rank r holding global rows [r·Tl, (r+1)·Tl) of
/// the sequence (group rank, not world rank). out is a host f32 (Tl, hs) tensor and lse a host
/// f32 (Tl) tensor, both overwritten:
///   out[i]  = Σ_j P[i][j] · v_all[j],   P[i][j] = exp(s_ij − lse[i]) for the keys row i sees,
///   s_ij    = (q[i] · k_all[j]) / √hs,  lse[i] = ln Σ_j exp(s_ij) over the keys row i sees
///             (the row's log-sum-exp: what a backward needs to remake P),
/// where k_all, v_all are the whole sequence's keys and values. Without `causal` every row sees
/// all T keys; with it row i sees key j only when j ≤ g (global positions): every row sees at
/// least itself, so lse is finite and no row is empty.
///
/// Algorithm, p − 1 ring steps: rank r starts holding its own block K|V (k and v packed into one
/// message of 2·Tl·hs floats) and, at step s = 0 .. p−1, holds the block of rank
/// src = (r − s) mod p. It folds that block into its rows (online softmax, per row: the block's
/// scores against the running max m, the old sum l and accumulator rescaled by exp(m_old − m_new),
/// the block's exponentials added), and, for s < p − 1, passes the block on to rank r + 1 and
/// receives the next one from rank r − 1. At the end out = accumulator / l and lse = m + ln l.
/// No rank ever holds more than two K|V blocks (the one it computes with and the one arriving),
/// nor more than one block's Tl × Tl scores. p = 1: plain attention, nothing sent.
///
/// Numerics: the softmax must be stable for large scores (|s| of hundreds: exp(s) alone
/// overflows f32 at s > 88.7), and a block that row i sees none of (causal: every key after g)
/// must leave that row unchanged (no NaN from −inf − (−inf)). The tests compare with a dense
/// double-precision softmax within 2e-5 (out) and 2e-5·(1 + |lse|) (lse), for |q|, |k|, |v| ≤ 1.
///
/// Traffic (what group.stats() counts under "send"; recv counts 0 bytes): p − 1 sends on every
/// rank of 2·Tl·hs·4 bytes each, (p − 1)·8·Tl·hs bytes = 2·(p−1)/p of the sequence's K and V,
/// and p − 1 receives. No collective of the group is used (stats().calls holds "send" and "recv"
/// only): in particular not all_gather, which would hold every rank's K and V at once.
///
/// Errors: a tensor not host f32, or of another shape than above, ends every rank with file:line
/// and the tensor's description (LLMP_CHECK). It must never deadlock, whatever the block size
/// (a blocking send on every rank at once can: labs/ring_all_reduce/README.md, "Why not just
/// send, then receive?").
void ring_attention_forward(ProcessGroup& group, const Tensor& q, const Tensor& k, const Tensor& v,
                            bool causal, Tensor& out, Tensor& lse);

}  // namespace llmp
