// HybridStrategy: 3D parallelism — data × pipeline × tensor parallelism — with ZeRO-1 over the
// data-parallel group (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", §2-3; the ZeRO-1 part: Rajbhandari et al. 2020, §5.1).
//
// The grid (common/comm/grid.h): world rank = (dp_rank·pp + pp_rank)·tp + tp_rank, tensor-
// parallel ranks adjacent (on a cluster: one node, NVLink), then pipeline, then data. For the
// default 8 = dp 2 × pp 2 × tp 2:
//
//   world rank:  0 1 2 3 4 5 6 7     tp groups {0,1} {2,3} {4,5} {6,7}   (f, g inside a stage)
//   dp_rank:     0 0 0 0 1 1 1 1     pp groups {0,2} {1,3} {4,6} {5,7}   (activations between
//   pp_rank:     0 0 1 1 0 0 1 1                                          stages, the tied wte)
//   tp_rank:     0 1 0 1 0 1 0 1     dp groups {0,4} {1,5} {2,6} {3,7}   (ZeRO-1)
//
// Nothing here is new: it is the three techniques of the earlier stages stacked, each talking
// over its own group. A rank's model is
//   - tensor parallelism (common/tp): the GPT with the rank's shapes — H/t heads, 4C/t MLP
//     columns, V/t rows of wte — and a TensorParallelComm over the tp group (f before the column-
//     parallel layers, g after the row-parallel ones; with sequence parallelism the residual
//     stream between them is split along the sequence);
//   - pipeline parallelism (common/pipeline): that slice's units cut into p·v virtual stages,
//     run by the executor on a 1F1B schedule (interleaved when v > 1); the tp ranks of one stage
//     run the same schedule in lock step, each sending its own activations (b, T/s, C) to the
//     rank of the same tp_rank in the next stage (s = t under sequence parallelism: Megatron's
//     scatter-gather optimisation comes for free);
//   - data parallelism: the replica of dp_rank trains on sequences [dp_rank·B/dp, (dp_rank+1)·B/dp)
//     of the global batch, its losses scaled by 1/(B·T) so that the sum over replicas is the
//     global gradient; ZeRO-1 over the dp group: reduce_scatter of the Ψ_r gradients, AdamW on
//     this rank's ⌈Ψ_r/dp⌉ shard (m and v only for it), all_gather of the updated parameters.
//
// One step:
//   1. the pipeline schedule over this replica's B/dp sequences in m micro-batches;
//   2. the tied wte's gradient all-reduced over {first stage, last stage} (V/t rows here);
//   3. sequence parallelism: the replicated parameters' gradients all-reduced over tp;
//   4. ZeRO-1 over dp: reduce_scatter, AdamW on the shard, all_gather; with --clip_grad the
//      global norm first, summed over the world from the elements each rank owns (its pipeline
//      stage's, wte once; a tensor replicated over tp on tp rank 0) that fall in its shard;
//   5. the loss: summed from the last stage over pp, then over dp.
// On a GPU (HybridOptions::device): the slice, its gradients, m and v and every buffer on the
// device; packs by copy_from of views; the state crosses by to_host / from_host only.
//
// Mixed precision (HybridOptions::mp, --precision bf16 / fp16): what the pipelines and tensor
// parallelism do, composed, with Megatron-LM's distributed optimizer over dp:
//   - the slice's parameters in 16 bits (2Ψ_r), widened unit by unit in the walk; activations and
//     so every f/g all_reduce, SP collective and p2p message in 16 bits;
//   - the gradients in fp32 (4Ψ_r, or 4⌈Ψ_r/dp⌉ under ZeRO-2): the m micro-batches add into them
//     (pipeline_strategy.h's main_grad), so the wte pair's all_reduce, SP's replicated gradients
//     and the dp reduce_scatters stay 4 bytes an element;
//   - ZeRO over dp keeps the fp32 master copy of its shard with m and v (12⌈Ψ_r/dp⌉); AdamW
//     updates the master shard and rounds it into the 16-bit parameters, whose all_gather then
//     carries 2 bytes an element: dp sends (dp-1)/dp·(4 + 2)Ψ_r under ZeRO-1;
//   - fp16: the loss times S through the executor; whether any rank's owned gradient (the same
//     elements --clip_grad counts) overflowed is agreed over the world, so every rank of every
//     grid dimension skips the same step.
// Bytes per rank and group: common/plan/hybrid_formulas.h, whose closed forms the report prints
// next to what each group's CommStats counted.
//
// Glossary: dp/pp/tp (p, t) the grid, m micro-batches, v chunks per rank, B global batch,
// b = B/(dp·m), T sequence, C channels, Ψ_r parameters of this rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/comm/grid.h"
#include "common/nn/gpt.h"
#include "common/pipeline/pipeline_strategy.h"
#include "common/plan/hybrid_formulas.h"
#include "common/tp/tensor_parallel_comm.h"
#include "common/tp/tp_model.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"

namespace llmp {

struct HybridOptions {
  int micro_batches = 4;         ///< m per replica and step
  int chunks = 1;                ///< v: 1 is 1F1B, > 1 interleaved 1F1B
  bool sequence_parallel = false;
  /// ZeRO stage over dp: 1 (whole gradient, one reduce_scatter per step) or 2 (a gradient
  /// shard only, every micro-batch reduce-scattered: zero2_grads.h)
  int zero = 1;
  std::string trace_path;        ///< Chrome trace of the pipeline ("" = none)
  /// Where the model walks and every state and buffer lives (--device cuda: Device::kCUDA; the
  /// collectives get device tensors, which an MPI backend stages through host buffers).
  Device device = Device::kCPU;
  /// --precision bf16 / fp16: 16-bit parameters and activations (so every tp, SP and pp message),
  /// fp32 gradients (the pipeline's main_grad), the fp32 master weights with m and v on the ZeRO
  /// shard (see "Mixed precision" above). fp32 by default.
  MixedPrecisionConfig mp;
};

/// What the last step measured on this rank (bytes): MemoryTracker's current bytes by category,
/// the executor's stored bytes per (micro-batch, chunk), and each group's CommStats.
struct HybridMeasured {
  double params = 0, grads = 0, optimizer = 0, activations_per_microbatch = 0;
  double tp = 0, regather = 0, repl_grads = 0, pp = 0, emb = 0, dp = 0;
  double grads_peak = 0;  ///< MemoryTracker's kGradients peak during the step
  int64_t dp_calls = 0;   ///< collective calls on the dp group (CommStats::calls)
};

// TpModel first (common/tp/tp_model.h): PipelineStrategy keeps a reference to the slice.
class HybridStrategy : private TpModel, public PipelineStrategy {
 public:
  /// Collective over grid.world(). Every rank initialises the whole model from `seed` and keeps
  /// its slice of its stages. Fails on every rank with one line (exit 2) when the grid does not
  /// fit the model (hybrid_rank_plan's messages: t ∤ H, 4C or V; L not divisible by p·v) or the
  /// schedule rejects (p, m, v).
  HybridStrategy(const GPTConfig& cfg, ProcessGrid& grid, AdamWConfig opt, uint64_t seed,
                 HybridOptions o);

  /// This replica's share of the global batch: B/dp sequences from dp_rank·B/dp.
  BatchSlice batch_slice(int global_batch) const override;
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  /// The whole model's state in GPT-2 order: shards gathered over dp, stages over pp, slices
  /// over tp. Collective over the world.
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Memory by category and bytes sent per group in the last step, each next to its closed form
  /// (common/plan/hybrid_formulas.h).
  std::vector<ReportRow> report() const override;
  /// World rank 0 prints the timeline of its pipeline (PipelineStrategy::finish).
  void finish() override;

  /// The closed forms for this rank and the last step's batch (hybrid_rank_plan).
  HybridRankPlan expected() const;
  /// What the last step measured on this rank.
  HybridMeasured last_measured() const { return measured_; }
  const HybridShape& shape() const { return shape_; }
  /// This rank's tensor-parallel slice of the GPT (its layout has the local shapes: H/t heads).
  const GPT& tp_model() const { return model_; }
  /// The host staging of device tensors (process_group_staging.h) over every group this rank
  /// communicates on (tp, its re-gather and replicated-gradient duplicates, pp, the wte pair,
  /// dp), summed since they were made: bytes down and up. Zero on the CPU.
  StagingStats staging_stats() const;
  ProcessGrid& grid() const { return grid_; }

 private:
  /// Step 3: the replicated tensors' gradients (their elements in this rank's stages) summed
  /// over tp, packed in one buffer: sends 2(t-1)/t·4·Ψ_repl,r.
  void all_reduce_replicated_grads();
  /// Step 4, ZeRO-1: reduce_scatter the gradients over dp, AdamW on the shard, all_gather.
  void zero1_step(int64_t step);
  /// AdamW on this rank's shard: `shard` holds the summed gradients (fp32) of local elements
  /// [begin, begin + count); the shard's parameters updated (mixed: the master shard, rounded
  /// into them), fp16's skip agreed and --clip_grad's norm summed over the world from the owned
  /// elements in it. Then the all_gather of the parameters over dp (their dtype: (dp-1)/dp·p_b·Ψ_r).
  void shard_step(const Tensor& shard, int64_t step);
  /// Bytes per element of this run's parameters, gradients, activations and optimizer state.
  HybridPrecision bytes() const;
  /// ZeRO-2 (hybrid_zero2.cc, zero2_grads.h): steps 1-3 with every micro-batch's gradients
  /// reduce-scattered into grad_shard_; returns the local loss and sets *t_opt after the
  /// schedule. Then zero2_step: AdamW on the shard, all_gather.
  double zero2_backward(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                        double t0, double* t_opt);
  void zero2_step(int64_t step);
  /// The report's ZeRO-2 rows (gradient peak, dp bytes and calls next to zero2_grads.h's forms;
  /// the replicated gradients all-reduced on the shard).
  void zero2_rows(std::vector<ReportRow>* rows) const;

  ProcessGrid& grid_;
  HybridShape shape_;
  ShardLayout shards_;                        // Ψ_r over dp
  Tensor grad_shard_;                         // ZeRO-2: ⌈Ψ_r/dp⌉ gradients (grads_ is freed)
  MetricsReducer dp_metrics_;                 // the loss over dp (bookkeeping)
  std::vector<std::pair<int64_t, int64_t>> repl_;  // local (offset, numel) of replicated tensors
  OwnedRanges clip_owned_;  // --clip_grad: local ranges this rank counts (before the shard cut)
  HybridMeasured measured_;
  int last_global_B_ = 0;
};

}  // namespace llmp
