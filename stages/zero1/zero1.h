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
// Mixed precision (--precision bf16 | fp16, common/train/mixed_precision.h): parameters and
// gradients are 16-bit (2Ψ + 2Ψ, the gradients reduce-scattered as 2 bytes per element) and the
// optimizer shard holds the fp32 master weights with m and v: 12⌈Ψ/N⌉ (K = 12, the paper's
// Table 1). Step 3 updates the master shard and rounds it into this rank's slice of the 16-bit
// parameters, which step 4 all-gathers; fp16's overflow check sees only this rank's gradient
// shard, so the skip is agreed over the group. Traffic 2(N-1)/N·2Ψ.
//
// What ZeRO-2 adds on top (stages/zero2): the full gradient never exists, each unit's gradients
// are reduce-scattered as soon as backward has produced them.
//
// ZeRO-R's constant buffer (--constant_buffer_mb X, common/train/constant_buffer.h, §6.2): step 2
// is then one reduce-scatter per chunk of cap = ⌊X·2^20⌋ bytes, cut from the top of the flat
// gradient and packed into ONE fused buffer (kCommBuffers, cap bytes), instead of one Ψ-element
// message; each rank's part of a chunk is written in place into its own shard range of the
// gradient buffer (that range was already copied into the buffer), so no receive buffer is
// allocated: the communication memory is cap whatever Ψ. Bytes sent and results unchanged.
//
// Glossary: B global batch, T sequence length, N ranks, Ψ parameters, S = ⌈Ψ/N⌉ shard size,
// r this rank, K optimizer bytes per parameter (8 here: fp32 m and v), cap the constant
// buffer's bytes.
#pragma once

#include <string>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// ZeRO-1 data parallelism over the group `dp`: replicated parameters and gradients, sharded
/// AdamW state. Memory per rank (fp32): 4Ψ + 4Ψ + 8⌈Ψ/N⌉ bytes; mixed: 2Ψ + 2Ψ + 12⌈Ψ/N⌉
/// (plan_memory(DPStage::kZeRO1, Ψ, N, mp.plan(), /*padded=*/true)).
class Zero1Strategy : public MixedPrecisionStrategy {
 public:
  /// Collective over `dp`. Every rank initialises the same parameters from `seed`. `mp`: the
  /// precision (the model's activation dtype must match it). `constant_buffer_mb` > 0: ZeRO-R's
  /// constant buffer of that many MiB (0: off; a bad value throws std::invalid_argument with
  /// constant_buffer_mb_error's message). On a device (model.device() != kCPU, fp32): every
  /// buffer on it; throws std::invalid_argument when constant_buffer_mb > 0 there (host memory).
  Zero1Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
                MixedPrecisionConfig mp = {}, double constant_buffer_mb = 0);

  BatchSlice batch_slice(int global_batch) const override;
  /// Collective. tokens/targets: (B/N, T) for this rank. Sends 2(N-1)/N·4Ψ bytes (mixed: ·2Ψ).
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  /// Collective. Mixed precision: `params` are the fp32 master weights (gathered from the shards).
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  /// Mixed precision: the master shard from `params`, the 16-bit copy rounded from all of it.
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Parameters 4Ψ, gradients 4Ψ, optimizer 8⌈Ψ/N⌉, sent per step 2(N-1)/N·4Ψ (mixed: 2Ψ, 2Ψ,
  /// 12⌈Ψ/N⌉, 2(N-1)/N·2Ψ). With the constant buffer also "comm buffer, peak in step"
  /// (MemoryTracker's kCommBuffers peak during the last step) next to the bound "cap".
  std::vector<ReportRow> report() const override;

  const ShardLayout& shards() const { return shards_; }
  /// The working copy of the parameters: Ψ elements, f32 or 16-bit.
  const Tensor& params_tensor() const { return params_; }
  AdamW& optimizer() { return opt_; }
  /// Bytes this rank sent during the last train_step.
  double last_step_bytes() const { return last_step_bytes_; }
  /// The constant buffer's bytes (0: off) and the reduce-scatters (chunks) of the last step.
  int64_t constant_buffer_cap() const { return cb_bytes_; }
  int last_step_chunks() const { return last_step_chunks_; }

 private:
  const GPT& model_;
  ProcessGroup& dp_;
  ShardLayout shards_;
  Tensor params_;  // Ψ, replicated, in mp_.dtype()
  Tensor grads_;   // Ψ, replicated: this rank's local gradients before the reduce-scatter
  AdamW opt_;      // m, v (and the fp32 master weights when 16-bit): S each
  MetricsReducer metrics_;
  double last_step_bytes_ = 0;
  int64_t cb_bytes_ = 0;  // the constant buffer's bytes; 0: one reduce-scatter of all Ψ
  int64_t last_step_peak_cb_ = 0;
  int last_step_chunks_ = 0;
};

}  // namespace llmp
