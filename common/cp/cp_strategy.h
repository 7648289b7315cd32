// Context parallelism: every sequence of the global batch split over the p ranks of a group for
// the whole model; weights replicated; attention across the split by an AttentionCore
// (common/nn/attention_core.h). The strategy the long-sequence stages share
// (stages/ring_self_attention, stages/ring_attention, stages/ulysses); they differ only in the
// core they hand it.
//
// Li et al. 2021 ("Sequence Parallelism: Long Sequence Training from System Perspective", §3)
// introduced the split for the whole model; Megatron-Core calls it context parallelism. One step:
//
//   1. every rank reads the WHOLE global batch (B sequences) and keeps its Tl = T/p positions of
//      each (GPT::with_attention_core): embeddings, LayerNorms, linear layers, MLP and the loss
//      of those rows, with the core's communication inside each block's attention;
//      loss scaled by 1/(B·T), so that the sum over ranks is the global mean loss;
//   2. after the backward, one all_reduce (sum) of the flat Ψ-element gradient buffer: each
//      rank's gradient is that of its tokens' part of the loss;        sends 2(p-1)/p·4Ψ
//   3. the same AdamW update on every rank.
//
// Memory per rank: model states 16Ψ (replicated, as naive DP), activations of B·T/p tokens, and
// the attention scores of whatever the core keeps: the T² term that the methods divide.
//
// Mixed precision (--precision bf16 / fp16, common/train/mixed_precision.h), as naive DP: 16-bit
// parameters and gradients (2Ψ + 2Ψ) and activations, the fp32 master copy with m and v (12Ψ),
// the gradient all_reduce of 2-byte elements (2(p-1)/p·2Ψ); fp16's overflow skip agreed over the
// group. The core gets the 16-bit q|k|v as stored: Ulysses moves it in 16 bits, the ring cores
// their K and V (fp32 products and accumulators); a core that cannot take 16 bits would run
// inside a WidenedCore (widened_core.h: fp32 copies in, fp32 messages, results rounded out).
// Traffic per step: the gradient all_reduce over `group`, and the core's over a duplicate of it
// (so that each report row counts one kind of traffic).
//
// Glossary: B global batch (sequences), T positions, Tl = T/p, p ranks, Ψ parameters, L blocks,
// C channels, H heads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/grid.h"
#include "common/comm/process_group.h"
#include "common/nn/attention_core.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/optim/grad_clip.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// Builds a core whose traffic goes over the given group (a duplicate the strategy owns).
using CoreFactory = std::function<std::unique_ptr<AttentionCore>(ProcessGroup& group)>;

class ContextParallelStrategy : public MixedPrecisionStrategy {
 public:
  /// Collective over `group` (p = its size). `model` must be the whole, untiled model, its
  /// activations in mp's storage dtype (f32, bf16 or f16); every rank initialises the same
  /// parameters from `seed`. On model.device() (--device cuda): parameters, gradients, AdamW's
  /// state (and master copy) and every buffer of the step, the gradient all_reduce and the
  /// core's collectives given device tensors (the MPI backend stages them); get_state /
  /// set_state cross through to_host / from_host. A 16-bit run wraps a core that does not take
  /// 16-bit tensors (AttentionCore::takes_16bit) in a WidenedCore. Throws std::invalid_argument
  /// as GPT::with_attention_core does (also for a device model with a host-only core) and as
  /// MixedPrecision's constructor (activations not in mp's dtype).
  ContextParallelStrategy(const GPT& model, ProcessGroup& group, const CoreFactory& make_core,
                          AdamWConfig opt, uint64_t seed, MixedPrecisionConfig mp = {});

  /// Every rank reads the whole global batch: [0, B).
  BatchSlice batch_slice(int global_batch) const override { return {0, global_batch}; }
  /// Throws std::invalid_argument (the core's one line) when T does not split over p.
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Model states (4Ψ, 4Ψ, 8Ψ; mixed: 2Ψ, 2Ψ, 12Ψ); gradient all_reduce bytes 2(p-1)/p·4Ψ
  /// (mixed: ·2Ψ); the core's bytes per step
  /// L·bytes_per_block; peak attention-score bytes (MemTag::kAttentionScores over the step);
  /// activations kept per block (the walk's measure) against the non-attention tensors of Tl
  /// rows plus the core's keep; this rank's attention forward FLOPs against the core's form.
  std::vector<ReportRow> report() const override;
  /// --recompute full: report() has the recomputed forward FLOPs (the linear layers' and the
  /// core's, not the whole-sequence walk's) and the kept checkpoints itself.
  bool reports_recomputation() const override { return true; }
  /// Block forwards the walk ran again in the last step (L under --recompute full).
  int64_t last_recomputed_blocks() const { return last_recomputed_blocks_; }
  /// Prints the core's calls per step (measured, and the closed form) and the ring overlap note.
  void finish() override;

  const AttentionCore& core() const { return *core_; }
  /// The attention group's CommStats (the core's traffic only).
  const CommStats& attention_stats() const { return attn_group_->stats(); }
  /// Sends and collectives the core made in the last step (receives not counted).
  int64_t last_attention_calls() const { return last_attn_calls_; }
  /// The working copy of the parameters (16-bit under mixed precision).
  const Tensor& params_tensor() const { return params_; }

 private:
  const GPT& base_;
  ProcessGroup& group_;
  std::shared_ptr<ProcessGroup> attn_group_;
  std::unique_ptr<AttentionCore> core_;
  GPT model_;  // base_ with core_
  Tensor params_, grads_;  // in mp_.dtype()
  AdamW opt_;
  // --clip_grad (clip_, MixedPrecisionStrategy's): after the all_reduce every rank holds the
  // whole gradient, so each clips by its own copy's norm, as a data-parallel replica does (no
  // collective).
  MetricsReducer metrics_;
  int last_B_ = 0, last_T_ = 0;
  double last_grad_bytes_ = 0, last_attn_bytes_ = 0;
  int64_t last_attn_calls_ = 0, last_score_peak_ = 0, last_attn_flops_ = 0;
  double last_kept_per_block_ = 0;
  int64_t last_recomputed_flops_ = 0, last_recomputed_blocks_ = 0, last_checkpoint_bytes_down_ = 0;
};

/// The grid of the context-parallel stages: the p ranks of the world form one group, cut like a
/// tensor-parallel group (adjacent ranks: in a cluster, one node). dp = pp = 1.
GridShape context_parallel_grid(int world_size);

}  // namespace llmp
