// Lab ulysses_all_to_all: the adapter header. The tests call seq_to_heads(), heads_to_seq() and
// ulysses_attention() and nothing else, so you may organise your code as you like behind them.
//
// DeepSpeed-Ulysses (Jacobs et al. 2023, "DeepSpeed Ulysses: System Optimizations for Enabling
// Training of Extreme Long Sequence Transformer Models", §3, Figure 2). A long sequence is split
// over the p ranks of a context-parallel group: rank r holds positions [r·Tl, (r+1)·Tl) of every
// head. Everything but attention is per position and needs nothing from the other ranks.
// Attention mixes positions but not heads, so for attention Ulysses changes what is split: one
// all_to_all gives each rank ALL T positions of H/p of the heads, attention runs there as on one
// device, and a second all_to_all brings the output back to the sequence split.
//
// Glossary: p = cp.size() ranks, r = cp.rank(), Tl positions per rank, T = p·Tl, H heads,
// Hp = H/p heads per rank, hs head size; a (Tl, H, hs) tensor is row-major: position, head,
// channel.
#pragma once

#include <functional>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp::lab {

/// The sequence split to the head split.
/// x: (Tl, H, hs) host f32, this rank's positions [r·Tl, (r+1)·Tl) of all H heads.
/// Returns (T, Hp, hs): every position 0 .. T−1, in order, of heads [r·Hp, (r+1)·Hp). Exact: the
/// same floats, moved.
/// Collective over cp: exactly one all_to_all of Tl·H·hs floats ((p−1)/p·4·Tl·H·hs bytes sent,
/// cp.stats()), nothing else; every rank passes the same shape.
/// Errors (std::invalid_argument, before any communication, one line):
///   "seq_to_heads: x has 2 dimensions, want 3 (Tl, H, hs)"
///   "seq_to_heads: H = 3 heads, not divisible by p = 2"
Tensor seq_to_heads(ProcessGroup& cp, const Tensor& x);

/// The head split back to the sequence split: the inverse of seq_to_heads.
/// y: (T, Hp, hs) host f32, all positions of this rank's heads [r·Hp, (r+1)·Hp).
/// Returns (Tl, H, hs), Tl = T/p: positions [r·Tl, (r+1)·Tl) of all H heads. Exact.
/// Collective over cp: exactly one all_to_all, the same bytes as seq_to_heads, nothing else.
/// Errors (std::invalid_argument, before any communication, one line):
///   "heads_to_seq: y has 2 dimensions, want 3 (T, Hp, hs)"
///   "heads_to_seq: T = 5 positions, not divisible by p = 2"
Tensor heads_to_seq(ProcessGroup& cp, const Tensor& y);

/// Attention on one device's worth of heads: q, k, v and the result (T, Hp, hs), every position.
using AttendFn = std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v)>;

/// Ulysses' attention for a sequence split: q, k, v (Tl, H, hs) this rank's positions, each to
/// the head split (seq_to_heads), attend(q, k, v) once on (T, Hp, hs), the result back
/// (heads_to_seq). Returns (Tl, H, hs): this rank's positions of the attention output, what
/// attend on the whole (T, H, hs) sequence on one device gives for them.
/// Collective over cp: four all_to_alls of Tl·H·hs floats each, nothing else (the project's stage
/// packs q|k|v into one all_to_all of three times the size: the same bytes, two calls fewer).
Tensor ulysses_attention(ProcessGroup& cp, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttendFn& attend);

}  // namespace llmp::lab
