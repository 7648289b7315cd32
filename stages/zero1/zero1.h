// ZeRO stage 1 (P_os): Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", §5.1 (optimizer state partitioning).
//
// Every rank keeps the full parameters and the full gradients (replicated, 4Ψ + 4Ψ bytes in
// fp32) but only its 1/N shard of the optimizer state (Adam's m and v, 8⌈Ψ/N⌉ bytes). One step:
//
//   1. forward and backward on this rank's B/N sequences into the full gradient buffer (Ψ);
//   2. the gradients are reduce-scattered: rank r receives the sum over ranks of shard r only.
//      (The paper's §5.1 all-reduces and then drops what it does not own; DeepSpeed's
//      reduce-scatter gives every rank exactly what its optimizer needs for half the traffic);
//   3. AdamW updates this rank's shard of the parameters with its shard of the gradients;
//   4. the updated shards are all-gathered so every rank again holds all parameters.
//
// Traffic per rank and step: reduce_scatter (N-1)/N·4Ψ + all_gather (N-1)/N·4Ψ = 2(N-1)/N·4Ψ,
// exactly one all_reduce's worth (§7): the memory saving is free. Shards are S = ⌈Ψ/N⌉ elements;
// the last rank's is padded (its optimizer updates only its count(r) valid elements).
//
// What ZeRO-2 adds on top (stages/zero2): the full gradient never exists, each unit's gradients
// are reduce-scattered as soon as backward has produced them.
//
// Glossary: B global batch, T sequence length, N ranks, Ψ parameters, S = ⌈Ψ/N⌉ shard size,
// r this rank, K optimizer bytes per parameter (8 here: fp32 m and v).
#pragma once

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/dp_util.h"
#include "common/train/strategy.h"

namespace llmp {

/// ZeRO-1 data parallelism over the group `dp`: replicated parameters and gradients, sharded
/// AdamW state. Memory per rank (fp32): 4Ψ + 4Ψ + 8⌈Ψ/N⌉ bytes
/// (plan_memory(DPStage::kZeRO1, Ψ, N, Precision::fp32(), /*padded=*/true)).
class Zero1Strategy : public Strategy {
 public:
  /// Collective over `dp`. Every rank initialises the same parameters from `seed`.
  Zero1Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed);

  BatchSlice batch_slice(int global_batch) const override;
  /// Collective. tokens/targets: (B/N, T) for this rank. Sends 2(N-1)/N·4Ψ bytes.
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Parameters 4Ψ, gradients 4Ψ, optimizer 8⌈Ψ/N⌉, sent per step 2(N-1)/N·4Ψ.
  std::vector<ReportRow> report() const override;

  const ShardLayout& shards() const { return shards_; }
  /// Bytes this rank sent during the last train_step.
  double last_step_bytes() const { return last_step_bytes_; }

 private:
  const GPT& model_;
  ProcessGroup& dp_;
  ShardLayout shards_;
  Tensor params_;  // Ψ, replicated
  Tensor grads_;   // Ψ, replicated: this rank's local gradients before the reduce-scatter
  AdamW opt_;      // m, v: S each
  MetricsReducer metrics_;
  double last_step_bytes_ = 0;
};

}  // namespace llmp
