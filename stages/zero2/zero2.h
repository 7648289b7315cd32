// ZeRO stage 2 (P_os+g): Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", §5.1-5.2.
//
// Every rank keeps the full parameters (replicated, 4Ψ bytes in fp32), but only its 1/N shard of
// the gradients and of the optimizer state. One step:
//
//   1. forward on this rank's B/N sequences with the full parameters;
//   2. backward unit by unit (final LayerNorm, blocks L..1, embeddings); as soon as a unit's
//      gradients are final they are reduce-scattered: each rank receives the sum over ranks of
//      the part that falls in its shard, and the unit's full gradient buffer is freed. The full
//      gradient never exists on any rank: peak gradient memory is the shard plus two units;
//   3. AdamW updates this rank's shard of the parameters with its shard of the gradients;
//   4. the updated shards are all-gathered so every rank again holds all parameters.
//
// Traffic per rank and step: reduce_scatter (N-1)/N·4Ψ + all_gather (N-1)/N·4Ψ = 2(N-1)/N·4Ψ,
// exactly one all_reduce's worth (§7). Shards are ⌈Ψ/N⌉ elements; the last rank's is padded.
//
// Glossary: B global batch, T sequence length, C channels, L layers, N ranks, Ψ parameters,
// S = ⌈Ψ/N⌉ shard size, r this rank.
#pragma once

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/dp_util.h"
#include "common/train/strategy.h"

namespace llmp {

class Zero2Strategy : public Strategy {
 public:
  /// Collective over `dp`. Every rank initialises the same parameters from `seed`.
  Zero2Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed);

  BatchSlice batch_slice(int global_batch) const override;
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  std::vector<ReportRow> report() const override;

  const ShardLayout& shards() const { return shards_; }

 private:
  const GPT& model_;
  ProcessGroup& dp_;
  ShardLayout shards_;
  Tensor params_;      // Ψ, replicated
  Tensor grad_shard_;  // S: the summed gradients of this rank's shard
  AdamW opt_;          // m, v: S each
  MetricsReducer metrics_;
  double last_step_bytes_ = 0;
  int64_t last_step_peak_grads_ = 0;
};

}  // namespace llmp
