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
// Mixed precision (--precision bf16 | fp16, common/train/mixed_precision.h): the replicated
// parameters are 16-bit (2Ψ); each unit's gradient is accumulated in fp32 by the walk, rounded
// once to 16 bits and reduce-scattered as 2 bytes per element into a 16-bit shard (2⌈Ψ/N⌉; the
// MPI backend sums each pair in fp32 and rounds, so the shard is rounded at every pairwise
// addition, not once); the optimizer shard holds the fp32 master weights with m and v:
// 12⌈Ψ/N⌉ (K = 12, the paper's Table 1). fp16's overflow check sees only this rank's gradient
// shard, so the skip is agreed over the group. Traffic 2(N-1)/N·2Ψ.
//
// ZeRO-R's constant buffer (--constant_buffer_mb X, common/train/constant_buffer.h, §6.2): the
// units' final gradients are packed into ONE fused buffer of cap = ⌊X·2^20⌋ bytes instead of
// being reduce-scattered one unit at a time in a message the unit's size; a unit larger than
// the free space is cut, and each full buffer (and the last, partial one) is reduce-scattered
// into the shards (every rank receives the part of the packed range inside its shard). The
// communication memory is cap whatever the unit sizes and L; bytes sent and results unchanged.
//
// ZeRO-Offload (--device cuda --offload optimizer; Ren et al. 2021, §4; common/train/
// offload_flag.h): the GPU keeps the replicated parameters and runs the walk; the host keeps the
// gradient shard, the fp32 master copy of the parameter shard and m, v (16⌈Ψ/N⌉ bytes) and steps
// AdamW on the CPU. Per step: each unit's device gradient is reduce-scattered into the host shard
// (the gradients copied down), AdamW updates the host master shard, which is copied up into the
// device parameters (4⌈Ψ/N⌉ bytes) and all-gathered there. Device model states: 4Ψ instead of
// 4Ψ + 12⌈Ψ/N⌉; results bit-identical (the same AdamW, elsewhere). In bf16/fp16 (the paper's
// setting): the 16-bit gradient shard on the host (2 bytes per element cross down), the fp32
// master, m, v there as AdamW's state, the update rounded on the host and copied up in 16 bits
// (2⌈Ψ/N⌉); device 2Ψ instead of 2Ψ + 14⌈Ψ/N⌉, host 14⌈Ψ/N⌉; bit-identical to ZeRO-2 in the
// same precision.
//
// Glossary: B global batch, T sequence length, C channels, L layers, N ranks, Ψ parameters,
// S = ⌈Ψ/N⌉ shard size, r this rank, cap the constant buffer's bytes.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"
#include "common/train/offload.h"
#include "common/train/strategy.h"

namespace llmp {

/// ZeRO-2 data parallelism over the group `dp`: replicated parameters, sharded gradients and
/// AdamW state. Memory per rank (fp32): 4Ψ + 4⌈Ψ/N⌉ + 8⌈Ψ/N⌉ bytes; mixed: 2Ψ + 2⌈Ψ/N⌉ +
/// 12⌈Ψ/N⌉ (plan_memory(DPStage::kZeRO2, Ψ, N, mp.plan(), /*padded=*/true)).
class Zero2Strategy : public MixedPrecisionStrategy {
 public:
  /// Collective over `dp`. Every rank initialises the same parameters from `seed`. `mp`: the
  /// precision (the model's activation dtype must match it). `constant_buffer_mb` > 0: ZeRO-R's
  /// constant buffer of that many MiB (0: off; a bad value throws std::invalid_argument with
  /// constant_buffer_mb_error's message). `offload_optimizer`: ZeRO-Offload; needs a model on a
  /// device (any precision) and no constant buffer (else std::invalid_argument naming what).
  Zero2Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
                MixedPrecisionConfig mp = {}, double constant_buffer_mb = 0,
                bool offload_optimizer = false);

  BatchSlice batch_slice(int global_batch) const override;
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  /// Collective. Mixed precision: `params` are the fp32 master weights (gathered from the shards).
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  /// Mixed precision: the master shard from `params`, the 16-bit copy rounded from all of it.
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Parameters, gradients, optimizer (fp32: 4Ψ, 4⌈Ψ/N⌉, 8⌈Ψ/N⌉; mixed: 2Ψ, 2⌈Ψ/N⌉, 12⌈Ψ/N⌉),
  /// the gradients' peak in the last step and the bytes it sent (2(N-1)/N·4Ψ; mixed ·2Ψ). With
  /// the constant buffer also "comm buffer, peak in step" (MemoryTracker's kCommBuffers peak
  /// during the last step) next to the bound "cap". Offloaded: the model states per device
  /// (MemoryTracker per device: on the GPU 4Ψ of parameters and nothing else between steps; on
  /// the host 4⌈Ψ/N⌉ each of master shard and gradient shard, 8⌈Ψ/N⌉ of m and v; 16-bit: 2Ψ on
  /// the GPU, on the host 2⌈Ψ/N⌉ of gradients and 12⌈Ψ/N⌉ of master, m and v).
  std::vector<ReportRow> report() const override;

  const ShardLayout& shards() const { return shards_; }
  /// The working copy of the parameters: Ψ elements, f32 or 16-bit.
  const Tensor& params_tensor() const { return params_; }
  AdamW& optimizer() { return opt_; }
  /// The constant buffer's bytes (0: off) and the reduce-scatters (chunks) of the last step.
  int64_t constant_buffer_cap() const { return cb_bytes_; }
  int last_step_chunks() const { return last_step_chunks_; }
  /// True when the optimizer is offloaded to the host (ZeRO-Offload).
  bool offloaded() const { return offload_; }

 private:
  const GPT& model_;
  ProcessGroup& dp_;
  ShardLayout shards_;
  Tensor params_;      // Ψ, replicated, in mp_.dtype()
  Tensor grad_shard_;  // S: the summed gradients of this rank's shard, in mp_.dtype()
  AdamW opt_;          // m, v (and the fp32 master weights when 16-bit): S each
  bool offload_;       // ZeRO-Offload: grad_shard_ and opt_ on the host, and offloaded_
  std::unique_ptr<OffloadedShard> offloaded_;  // the host side of the shard (offload.h)
  MetricsReducer metrics_;
  double last_step_bytes_ = 0;
  int64_t last_step_peak_grads_ = 0;
  int64_t cb_bytes_ = 0;  // the constant buffer's bytes; 0: one reduce-scatter per unit
  int64_t last_step_peak_cb_ = 0;
  int last_step_chunks_ = 0;
};

}  // namespace llmp
