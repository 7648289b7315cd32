// RingAttention: causal attention over a sequence split across p ranks, computed blockwise with an
// online softmax while key/value blocks travel around a ring of the ranks.
//
// Papers: Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise Transformers for Near-Infinite
// Context" (§3, the ring of key/value blocks); the online softmax of Milakov & Gimelshein 2018 and
// FlashAttention (Dao et al. 2022, Algorithm 1: running max m, running sum l, unnormalised output
// O); the backward as FlashAttention-2 (Dao 2023, Algorithm 2: recompute P from the log-sum-exp,
// D = rowsum(dO ⊙ O)) and Megatron-Core's context parallelism, whose causal load balancing
// (rank i holds chunks i and 2p − 1 − i) this core also follows.
//
// The split. The sequence is cut into 2p chunks of c = T/(2p) positions; each rank holds two:
//   kBalanced    rank i: chunks i and 2p − 1 − i   every rank computes 2p + 1 chunk pairs
//   kContiguous  rank i: chunks 2i and 2i + 1      rank i computes 4i + 3 chunk pairs
// (per (b, h), over the whole ring; stages/ring_attention/README.md derives both). A chunk pair
// (query chunk q, key chunk k) is SKIPPED when k > q (every key after every query), computed in
// full when k < q, and masked inside when k == q (the diagonal).
//
// Forward (per (b, h), for each of the p blocks that pass through this rank, own block first):
//   S   = Q Kᵦᵀ / √hs               (Tl,Tl), chunk pair by chunk pair, masked pairs skipped
//   m'  = max(m, rowmax S)           running max, per query row
//   P~  = exp(S − m')                unnormalised probabilities of this block
//   l   = e^(m − m') l + rowsum P~   running sum, rescaled to the new max
//   O   = e^(m − m') O + P~ Vᵦ       unnormalised output, rescaled likewise
// then out = O / l and keep->a = lse = m + log l (B,H,Tl).
// Backward (the ring again, each block now carrying its owner's accumulators dK|dV):
//   D = rowsum(dO ⊙ O);  P = exp(S − lse);  dVᵦ += Pᵀ dO;  dP = dO Vᵦᵀ;
//   dS = P ⊙ (dP − D) / √hs;  dQ += dS Kᵦ;  dKᵦ += dSᵀ Q
//
// Messages (all on `group`, to rank r + 1, from rank r − 1; K|V or dK|dV of one rank's rows,
// (B,Tl,2A): a K|V block in the activations' dtype, 2e·B·Tl·A bytes with e = 4 in fp32 and 2 in
// bf16/fp16; an accumulator always fp32, 8·B·Tl·A bytes):
//   forward   p − 1 sends of K|V
//   backward  p − 1 sends of K|V, and p sends of the dK|dV accumulator: a block's accumulator
//             visits its p ranks in ring order and the last one sends it home
//   total     3p − 2 sends per block and step (none at p = 1): (3p − 2)·8BTA/p bytes in fp32,
//             (2p − 1)·8BTA/p in 16 bits (ring_attention.cc says how the 16-bit run computes).
// Overlap: before computing with the block it holds, a rank issues the isend of that block and
// the irecv of the next one (double buffering in MemCategory::kCommBuffers), and in the backward
// also the irecv of the accumulator it will add to; it waits only after the block's computation.
// So the transfer of the next K|V block (and of the accumulators) may run under the current
// block's O(Tl²·hs) work, as far as the backend progresses messages while the rank computes.
//
// Memory: one (Tl,Tl) score block per call in the forward (S, reused for P~ by every (b, h) and
// block), two in the backward (P and dS): attention_scores(), so the step's peak of
// MemTag::kAttentionScores is 8·Tl² bytes, whatever L, B and H. The K|V and accumulator buffers
// are kCommBuffers; m, l, D and this rank's dK|dV contribution are kActivations freed on return;
// keep->a (lse) is the only thing kept.
//
// FLOPs (kernels/cpu/flops.h): 2·c·c·hs per computed chunk pair for Q Kᵀ and the same for P V
// (the diagonal pairs computed on the full c × c square, then masked); the backward counts five
// such products per pair (S again, dP, dV, dQ, dK).
//
// Glossary: B sequences, T positions, p ranks, r this rank, Tl = T/p rows held here, c = T/(2p)
// chunk, A channels, H heads, hs = A/H, L blocks; m running max, l running sum, lse log-sum-exp.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/attention_core.h"

namespace llmp {

class RingAttention : public AttentionCore {
 public:
  /// Which two of the 2p chunks of c = T/(2p) positions each rank holds (see the file comment).
  enum class Split { kBalanced, kContiguous };

  /// `group`: the p ranks every sequence is split over (the strategy passes a duplicate of the
  /// context-parallel group, so its CommStats hold this core's sends alone). Must outlive the core.
  explicit RingAttention(ProcessGroup& group, Split split = Split::kBalanced);

  /// The one line why sequences of T positions cannot be split over p ranks ("" when they can):
  /// 2p must divide T (both splits cut the sequence into 2p chunks).
  static std::string split_error(int T, int H, int p);

  std::string name() const override { return "ring attention"; }
  /// Device-ready: every buffer beside qkv, every step a kernel of kernel_ops(qkv.device()).
  bool supports_device() const override { return true; }
  /// 16-bit q|k|v: the K|V blocks travel in 16 bits, the math stays fp32 (ring_attention.cc).
  bool takes_16bit() const override { return true; }
  int shards() const override { return p_; }
  int rank() const override { return r_; }
  Split split() const { return split_; }
  /// The two chunk indices in [0, 2p) that rank `r` holds, ascending.
  std::array<int, 2> chunks(int r) const;
  /// Positions of chunks(rank()) in order: 2c = T/p of them. Throws std::invalid_argument
  /// ("ring attention: T=30 is not divisible by 2p=8 (chunks of the causal split)") when 2p ∤ T.
  std::vector<int> positions(int T) const override;

  /// qkv (B,Tl,3A) -> out (B,Tl,A) (already allocated), both f32, bf16 or f16 alike; keep->a =
  /// lse (B,H,Tl) f32. Every tensor on qkv's device (CPU or GPU: the math is
  /// kernel_ops(qkv.device())'s attention_block kernels, kernels/cpu/attention_block.h). Throws
  /// std::invalid_argument on 2p ∤ T, H ∤ A, a shape that is not (B,Tl,3A) / (B,Tl,A), or out on
  /// another device or in another dtype.
  void forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
               AttentionKeep* keep) override;
  /// dqkv (B,Tl,3A) overwritten from dout (B,Tl,A), qkv, out and keep->a, all on qkv's device
  /// and in its dtype (lse f32; std::invalid_argument naming the one that is not); frees *keep.
  void backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, AttentionKeep* keep,
                Tensor& dqkv, int B, int T, int H) override;

  /// (3p − 2)·8BTA/p for p > 1 in fp32, (2p − 1)·8BTA/p in 16 bits; 0 at p = 1.
  double bytes_per_block(int B, int T, int A, int H) const override;
  std::string bytes_formula_text() const override;
  /// 3p − 2 for p > 1 (p − 1 forward, 2p − 1 backward), 0 at p = 1.
  int calls_per_block() const override;
  /// The forward's p − 1 K|V blocks of 2e·B·Tl·A bytes; 0 at p = 1.
  double forward_bytes_per_block(int B, int T, int A, int H) const override;
  int forward_calls_per_block() const override { return p_ - 1; }
  /// lse: 4·B·H·T/p.
  double kept_bytes_per_block(int B, int T, int A, int H) const override;
  /// 8(T/p)²: the backward's P and dS of one (Tl,Tl) block.
  double peak_score_bytes(int B, int T, int A, int H, int L) const override;
  std::string peak_score_formula_text() const override;
  /// 4·B·c²·A·n with n = 2p + 1 (balanced) or 4r + 3 (contiguous) chunk pairs.
  double forward_flops_per_block(int B, int T, int A, int H) const override;

 private:
  struct Dims;  // B, T, H and the derived Tl, c, A, hs of one call (ring_attention.cc)
  Dims dims(const Tensor& qkv, int B, int T, int H, const char* where) const;
  ProcessGroup& group_;
  Split split_;
  int p_, r_;
};

}  // namespace llmp
