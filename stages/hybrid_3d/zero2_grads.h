// ZeRO-2 under a pipeline: the gradient sink that reduce-scatters every micro-batch's gradients
// into this rank's shard, and the closed forms of what that costs (Rajbhandari et al. 2020,
// "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", §5.2 for P_g; the
// pipeline: Narayanan et al. 2021, §2.2).
//
// ZeRO-1 under a pipeline keeps the whole gradient (g·Ψ_r) for the step: the m micro-batches
// ADD into it, and one reduce_scatter at the end hands each data-parallel rank its shard. ZeRO-2
// keeps only the shard (g·⌈Ψ_r/dp⌉) for the step, so the accumulation over micro-batches has to
// happen ON THE SHARDS: in every micro-batch's backward each unit's gradient goes into a
// transient buffer (GradSink::get), and as soon as it is final for that micro-batch
// (GradSink::ready) it is reduce-scattered over dp, this rank's part ADDED into the shard, and
// the buffer freed:
//
//   shard_d += Σ_replicas g_i(unit)[shard d's part]    for every micro-batch i and unit
//
// so the dp group carries m reduce_scatters of Ψ_r instead of one.
//
// The tied wte. The two copies' gradients (first stage: unit 0 = wte rows + wpe; last stage: the
// wte copy) must be summed over the embedding pair before the optimizer sees them. The two end
// stages have different Ψ_r and so different shard boundaries: the wte elements of dp rank d's
// shard on the first stage are not those of its partner on the last stage, and a pair
// all_reduce on the shards would add unrelated elements. So with p > 1 unit 0 (first stage) and
// the wte copy (last stage) are DEFERRED: they accumulate whole over the m micro-batches (a
// transient of D_r elements alive for the step), the pair all_reduce sums them once, and then
// they are reduce-scattered once (flush_deferred). The replicated gradients of sequence
// parallelism need no such care: every tensor-parallel rank of a stage has the same local
// layout, hence the same shard boundaries, and they are all-reduced over tp on the shards.
//
// Per rank and step (fp32, g = 4 bytes), with D_r the deferred elements (p > 1: unit 0 on the
// first stage, V·C/t on the last; 0 elsewhere), U_r the units reduce-scattered per micro-batch:
//
//   dp bytes   (dp-1)/dp·4·( m·(Ψ_r - D_r) + D_r )      reduce_scatters
//            + (dp-1)/dp·p_b·Ψ_r                        the parameters' all_gather (p_b = 4;
//                                                       2 in bf16/fp16, whose gradients stay
//                                                       fp32: hybrid_3d.h)
//   dp calls   m·U_r + [D_r > 0] + 1
//   gradients  4⌈Ψ_r/dp⌉ at the end of the step; peak 4(⌈Ψ_r/dp⌉ + W0_r + largest other unit)
//              during it, W0_r = unit 0's elements on this rank (deferred when p > 1; with
//              p = 1 it lives from the head's backward to the embedding's); max(W0_r, largest)
//              instead of the sum on a first stage without the head at m = 1 (unit 0's buffer
//              is made after the only micro-batch's block transients are freed)
//
// common/plan/hybrid_formulas.h (the planner's) has the same bytes, D_r from the model's
// dimensions, and m + [D_r > 0] + 1 calls: one bucket per micro-batch (all of a micro-batch's
// units in one message).
//
// Glossary: dp/p/t the grid, m micro-batches, Ψ_r parameters of this rank (local layout of
// gpt_partition.h), D_r deferred elements, U_r units per micro-batch, V vocab, C channels.
#pragma once

#include <cstdint>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/nn/unit_runner.h"
#include "common/pipeline/gpt_partition.h"
#include "common/train/dp_util.h"

namespace llmp {

/// The closed forms above for pipeline rank `rank`.
struct PipelineZero2Plan {
  int64_t psi_r = 0;          ///< Ψ_r (elements)
  int64_t deferred = 0;       ///< D_r (elements)
  int64_t unit0 = 0;          ///< W0_r: unit 0's elements here (the wte copy on the last stage)
  int64_t largest_other = 0;  ///< the largest other unit in the rank's chunks (elements)
  int units_per_microbatch = 0;  ///< U_r
  double dp_bytes = 0;        ///< bytes sent over dp per step
  int dp_calls = 0;           ///< collective calls on dp per step
  double grads_peak = 0;      ///< bytes of gradients at their peak during the step
};

/// `layout` is the rank's model slice (GPT::layout()), `part` its pipeline partition, `defer`
/// whether unit 0 / the wte copy are deferred (this rank is one of two embedding ranks),
/// `param_bytes` p_b the bytes of a parameter element in the all_gather (4, or 2 in bf16/fp16;
/// the gradients are fp32 in every precision).
PipelineZero2Plan pipeline_zero2_plan(const GPTLayout& layout, const GPTPartition& part,
                                      int rank, int dp, int m, bool defer,
                                      double param_bytes = 4);

/// Elements of unit u in rank `rank`'s local buffer: the unit's, except unit 0 on a rank that
/// holds only the wte copy (V·C/t).
int64_t unit_numel_on_rank(const GPTLayout& layout, const GPTPartition& part, int rank, int u);

/// The GradSink of one step of the executor under ZeRO-2 (see above). The references must
/// outlive the sink.
class PipelineZero2Grads : public GradSink {
 public:
  /// grad_shard: ⌈Ψ_r/dp⌉ fp32 elements, zeroed by the caller at the start of the step; the
  /// sink ADDS every micro-batch's reduce-scattered part into it. `shards` is over the rank's
  /// local buffer of Ψ_r elements.
  PipelineZero2Grads(const GPTLayout& layout, const GPTPartition& part, int rank,
                     ProcessGroup& dp, const ShardLayout& shards, Tensor& grad_shard, bool defer);
  /// Unit u's transient gradient (zeros, kGradients), allocated on first use.
  float* get(int unit) override;
  /// Collective over dp, unless u is deferred: reduce_scatter of the unit's gradient, sends
  /// (dp-1)/dp·4·numel(u); this rank's part added into the shard; the transient freed.
  void ready(int unit) override;
  /// The deferred unit 0 / wte copy ((D_r) elements; wte rows first), undefined when none.
  Tensor& deferred() { return unit_[0]; }
  /// Collective over dp: reduce-scatters the deferred buffer into the shard and frees it.
  void flush_deferred();

 private:
  /// shard += Σ_dp g[this shard's part]; g holds local elements [a, a + g.numel()).
  void reduce_scatter_add(int64_t a, const Tensor& g);

  const GPTLayout& layout_;
  const GPTPartition& part_;
  int rank_;
  ProcessGroup& dp_;
  const ShardLayout& shards_;
  Tensor& grad_shard_;
  bool defer_;
  std::vector<Tensor> unit_;  // per unit, between get and ready
};

}  // namespace llmp
