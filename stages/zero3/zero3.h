// ZeRO stage 3 (P_os+g+p): Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", §5.3 and §7.2.3; the same algorithm as PyTorch FSDP with
// FULL_SHARD (Zhao et al. 2023).
//
// Every rank keeps only its 1/N shard of the parameters, of the gradients and of the optimizer
// state: 4⌈Ψ/N⌉ + 4⌈Ψ/N⌉ + 8⌈Ψ/N⌉ bytes in fp32. A unit's full parameters exist only while it
// computes (UnitGatherer). One step is the shared walk over the units (common/nn/unit_runner.h),
// with the UnitGatherer as its ParamSource and ReduceScatterGrads (dp_util.h) as its GradSink:
//
//   forward    E  embed          needs unit 0           x_0 = wte[tokens] + wpe
//              F_l block l fwd   needs unit 1+l         x_{l+1} = block_l(x_l),  l = 0..L-1
//              H  head           needs units L+1 and 0  loss and its backward (fused, llm.c):
//                                                       dx_L, grads of ln_f and of wte (tied)
//   backward   G_l block l bwd   needs unit 1+l         dx_l, grads of block l,  l = L-1..0
//              Eb embed bwd      needs nothing          grads of wte, wpe (a scatter of dx_0)
//
// Before a step of the walk runs, the all-gathers of the next step's units are started (prefetch:
// communication overlaps computation); after it, its units are freed unless the next step needs
// them. So a rank holds at most the units of two consecutive steps. Right after a unit's
// gradients are final (H for L+1, G_l for 1+l, Eb for 0) they are reduce-scattered into the
// gradient shard and the full unit gradient is freed, as in ZeRO-2. Unit 0's gradient lives from
// H (tied head adds to wte) to Eb (embedding adds to wte, wpe). Then AdamW updates the shard.
// No all-gather of the updated parameters: the next step gathers what it needs.
//
// How often each unit is gathered per training step, and why:
//   unit 0 (wte, wpe)    2×  for E (forward) and for H (the head's forward+backward); freed in
//                            between; Eb needs no parameters (its gradient is a scatter of dx_0)
//   units 1..L (blocks)  2×  for F_l (forward) and for G_l (backward)
//   unit L+1 (ln_f)      1×  for H only: the fused head is its forward and its backward at once
// Traffic per rank and step, exactly (CommStats):
//   all_gather (N-1)/N·4·(2Ψ - n_{L+1}) + reduce_scatter (N-1)/N·4Ψ
//   = 3(N-1)/N·4Ψ - (N-1)/N·4·n_{L+1}          (n_{L+1} = 2C; 1.5× DDP less ln_f's 2C, §7.2.3)
// Peak parameter memory per rank (held = units of the step computing ∪ the step prefetched):
//   4·(⌈Ψ/N⌉ + n_blk + max(n_0 + n_{L+1}, n_blk))   for L ≥ 2
// from the pairs (F_{L-1}, H) and (H, G_{L-1}) (block + head units) and (F_l, F_{l+1}) (two
// blocks). mini: two blocks (n_blk = 198,272 > n_0 + n_{L+1} = 41,216).
//
// Glossary: B global batch, T sequence length, C channels, L layers, N ranks, Ψ parameters,
// S = ⌈Ψ/N⌉ shard size, r this rank, n_u elements of unit u (n_blk = n_b: one block, 12C² + 13C;
// n_f = n_{L+1} = 2C: the final LayerNorm).
#pragma once

#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/dp_util.h"
#include "common/train/strategy.h"

namespace llmp {

/// Bytes one rank sends per training step: 3(N-1)/N·4Ψ - (N-1)/N·4·n_{L+1} (header).
double zero3_bytes_per_step(const GPTLayout& layout, int ranks);

/// Peak parameter bytes per rank during a step: 4·(⌈Ψ/N⌉ + n_blk + max(n_0 + n_{L+1}, n_blk)).
/// Requires L ≥ 2 (fails otherwise: the pair of two blocks does not exist).
double zero3_peak_param_bytes(const GPTLayout& layout, int ranks);

/// ZeRO-3 data parallelism over `dp`. Memory per rank (fp32, between steps): (4 + 4 + 8)⌈Ψ/N⌉
/// bytes = plan_memory(DPStage::kZeRO3, Ψ, N, Precision::fp32(), /*padded=*/true).
class Zero3Strategy : public Strategy {
 public:
  /// Collective over `dp`. Every rank initialises the same parameters from `seed` and keeps its
  /// shard. Requires L ≥ 1.
  Zero3Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed);

  BatchSlice batch_slice(int global_batch) const override;
  /// Collective. tokens/targets: (B/N, T). Sends zero3_bytes_per_step(layout, N) bytes.
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  /// Collective (gathers every unit once: the forward part of the schedule).
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Steady-state memory against (4+4+8)⌈Ψ/N⌉, peak parameters and gradients in the last step,
  /// and bytes sent in the last step, each next to its closed form.
  std::vector<ReportRow> report() const override;

  const ShardLayout& shards() const { return shards_; }
  double last_step_bytes() const { return last_step_bytes_; }
  /// Peak bytes counted as kParameters during the last train_step.
  int64_t last_step_peak_params() const { return last_step_peak_params_; }
  /// all-gathers of unit u during the last train_step.
  int last_step_gathers(int u) const { return last_step_gathers_.at(u); }

 private:
  /// The walk (unit_runner.h) with the UnitGatherer as its ParamSource and, when `grads`,
  /// ReduceScatterGrads as its GradSink. Returns this rank's loss_scale·Σ loss (training) or
  /// its mean loss (evaluation).
  double run_walk(const int32_t* tokens, const int32_t* targets, int B, int T, float loss_scale,
                  bool grads);

  const GPT& model_;
  ProcessGroup& dp_;
  ShardLayout shards_;
  Tensor param_shard_;  // S: parameters [r·S, r·S + count(r)) (padded)
  Tensor grad_shard_;   // S: the summed gradients of this rank's shard
  AdamW opt_;           // m, v: S each
  MetricsReducer metrics_;
  double last_step_bytes_ = 0;
  int64_t last_step_peak_params_ = 0, last_step_peak_grads_ = 0;
  std::vector<int> last_step_gathers_;
};

}  // namespace llmp
