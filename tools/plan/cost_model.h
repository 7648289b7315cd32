// The planner's cost model: memory, compute, communication and bubble of one configuration of
// 3D parallelism (dp × pp × tp, sequence parallelism, ZeRO over dp, 1F1B with v chunks,
// recomputation) on a cluster, predicted per GPU. The memory and the bytes per group are the
// project's closed forms (common/plan/hybrid_formulas.h); this file adds what the closed forms do
// not say: where each group sits (placement.h), seconds, the bubble, the in-flight micro-batches,
// ZeRO-3, the last stage's logits, and model FLOPs.
//
// Per pipeline rank r (every dp and tp rank of a stage is alike), with b = B/(dp·m) sequences of
// T tokens per micro-batch, k = L/(p·v) blocks per virtual stage and t = tp:
//
//   memory     params + grads + optimizer             (hybrid_formulas; ZeRO-3 below)
//              + n_r · act_mb                          act_mb: one micro-batch through one chunk
//              + logits on the last stage: 4·b·T·V/t   (fp32 logits kept for the cross-entropy)
//              n_r = min(m, p - r)                     1F1B (Narayanan et al. 2021 §2.2.1)
//              n_r = min(2(p-r-1) + (v-1)p + 1, m·v)   interleaved (§2.2.2, Megatron's warm-up + 1)
//   FLOPs      per block and sequence, forward: 24·T·C² + 4·T²·C (QKV, projection, MLP: 24TC²;
//              QKᵀ and P·V: 4T²C); backward twice the forward; full recomputation one forward
//              more; selective recomputation 2·T²·C more (QKᵀ again, recompute_formulas.h). The
//              last stage adds the head 6·T·C·V. A rank does its k·v blocks for B/dp sequences, /t.
//              Summed over the model: F = 72·B·T·L·C²·(1 + T/6C + V/12LC) without recomputation,
//              96·B·T·L·C²·(1 + T/6C + V/16LC) with full recomputation (Narayanan et al. 2021,
//              eq. (3)).
//   seconds    compute_r = FLOPs_r / (peak · efficiency)
//              group g: bytes_g / bw(g) + α · ring steps_g, bw(g) = intra- or inter-node bandwidth
//              per GPU by where the group sits (α-β model; ring steps: n-1 per reduce_scatter or
//              all_gather, 2(n-1) per all_reduce, 1 per point-to-point send)
//   step       work_r = compute_r + tp_r + regather_r + pp_r         (on the critical path of
//                                                                    every micro-batch)
//              pipeline = max_r work_r · (1 + (p-1)/(v·m))           (1F1B's bubble (p-1)/(v·m))
//              after    = max_r (dp_r + emb_r + repl_grads_r)        (after the flush, no overlap)
//              step     = pipeline + after
//   MFU        F (without recomputation) / (step · N · peak); the hardware FLOP/s count
//              recomputation too (as Narayanan et al.'s Table 1 does).
//
// ZeRO-3 (not in hybrid_formulas; the planner's addition, Rajbhandari et al. 2020 §5.3): the
// parameters are sharded too, p_b·⌈Ψ_r/dp⌉, and gathered per micro-batch for the forward and again
// for the backward, the gradients reduce-scattered per micro-batch:
// dp bytes = m·(dp-1)/dp·Ψ_r·(2·p_b + g), 3m calls. The transient of one gathered unit is left out.
//
// Glossary: B global batch (sequences), T sequence, L layers, C channels, H heads, V vocab, N GPUs
// used = dp·pp·tp, p = pp, t = tp, v chunks per rank, m micro-batches, Ψ_r parameters held by
// pipeline rank r, p_b/g bytes per parameter/gradient element, α latency per message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/plan/hybrid_formulas.h"
#include "tools/plan/placement.h"

namespace llmp::plan {

/// A GPT: L blocks of width C with H heads, vocabulary V, sequences of T tokens (ctx rows of wpe,
/// ctx ≥ T; ctx = T when not given).
struct ModelSpec {
  std::string name = "custom";
  int64_t L = 0, C = 0, H = 0, V = 0, T = 0, ctx = 0;
  TpModelDims dims() const { return {V, ctx, L, C, H}; }
  /// Ψ = V·C + ctx·C + L·(12C² + 13C) + 2C (elements).
  double params() const;
};

/// Per GPU: memory (bytes), peak (FLOP/s), bandwidths (bytes/s, each GPU's share of its link),
/// latency α (seconds per message). `efficiency` is the fraction of peak the matrix products
/// are assumed to reach (not measured here).
struct Cluster {
  int gpus_per_node = 8, nodes = 1;
  double memory = 80e9, peak_flops = 312e12, bw_intra = 300e9, bw_inter = 25e9, latency = 0;
  double efficiency = 0.75;
  int gpus() const { return gpus_per_node * nodes; }
};

/// One configuration: the grid, the schedule, ZeRO (0..3 here), recomputation.
struct PlanConfig {
  HybridShape shape;  ///< shape.zero may be 3 (computed here, see the file comment)
  bool mixed = true;  ///< bf16/fp16 with fp32 master weights (K = 12), else fp32 (K = 8)
  int gpus() const { return shape.dp * shape.pp * shape.tp; }
};

/// What one pipeline rank costs. Bytes and seconds per step.
struct RankCost {
  int r = 0;
  HybridRankPlan plan;  ///< the closed forms (ZeRO-3 applied on top when zero = 3)
  int in_flight = 0;    ///< (micro-batch, chunk) activations held at the peak
  double activations = 0, logits = 0, memory = 0;
  double flops = 0, compute = 0;
  double tp = 0, regather = 0, pp = 0, repl = 0, emb = 0, dp = 0;  ///< seconds per group
  double work() const { return compute + tp + regather + pp; }
  double after() const { return dp + emb + repl; }
};

/// The prediction for one configuration.
struct PlanCost {
  PlanConfig config;
  GroupPlacement placement;
  std::vector<RankCost> ranks;  ///< the ranks evaluated (see evaluated_ranks)
  double memory = 0;            ///< the largest rank's bytes
  int memory_rank = 0;
  bool fits = false;
  double pipeline = 0, bubble = 0, after = 0, step = 0;
  double model_flops = 0, hardware_flops = 0;  ///< per step, whole model
  double mfu = 0, hw_flops_per_gpu = 0;        ///< fraction of peak; FLOP/s
  /// Seconds per step by component, on the ranks that set the step: compute and the groups on
  /// the critical rank (the one with the largest work), dp/emb/repl on the slowest after-flush.
  double t_compute = 0, t_tp = 0, t_regather = 0, t_pp = 0, t_dp = 0, t_emb = 0, t_repl = 0;
};

/// Pipeline ranks whose costs bound every rank's: 0, 1 and p-1 (ranks 1..p-2 hold the same
/// units, and rank 1 the most in-flight micro-batches among them).
std::vector<int> evaluated_ranks(int pp);

/// (micro-batch, chunk) activations pipeline rank r holds at the peak (file comment).
int in_flight(int p, int m, int v, int r);

/// Model FLOPs per step: 72·B·T·L·C²·(1 + T/6C + V/12LC) (no recomputation counted).
double model_flops(const ModelSpec& model, int64_t B);

/// The cost of pipeline rank r (0 ≤ r < pp) of `cfg`: the closed forms (with ZeRO-3 on top),
/// in-flight activations, FLOPs and seconds per group. Throws as `evaluate`.
RankCost rank_cost(const ModelSpec& model, int64_t B, const Cluster& cluster,
                   const PlanConfig& cfg, int r);

/// The cost of `cfg` for `model`, global batch B, on `cluster`. Throws std::invalid_argument
/// (hybrid_formulas' messages, or "ZeRO stage 4 ...") when the configuration is not valid.
PlanCost evaluate(const ModelSpec& model, int64_t B, const Cluster& cluster, const PlanConfig& cfg);

}  // namespace llmp::plan
