// Small pieces shared by the data-parallel stages: how a flat buffer of Ψ elements is cut into
// N shards, the loss average that is bookkeeping, not
// algorithm (it goes over a duplicate() group so CommStats shows only the technique's bytes),
// and the state copies of get_state/set_state (replicated: a memcpy; sharded: an all_gather).
//
// Glossary: Ψ parameter count, N ranks, S = ⌈Ψ/N⌉ shard size, B global batch, T sequence length.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/nn/unit_runner.h"
#include "common/optim/adamw.h"
#include "common/plan/memory_planner.h"
#include "common/train/strategy.h"
#include "kernels/cpu/convert.h"

namespace llmp {

/// The shards of a flat buffer of Ψ elements over N ranks: rank i owns [i·S, i·S + count(i)),
/// S = ⌈Ψ/N⌉, count(i) = clamp(Ψ - i·S, 0, S). Every rank allocates S (the padding).
struct ShardLayout {
  ShardLayout(int64_t psi, int ranks);
  int64_t psi, padded;           ///< Ψ and S = ⌈Ψ/N⌉
  std::vector<int64_t> begin;    ///< i·S, clamped to Ψ
  std::vector<int64_t> count;    ///< valid elements of shard i
  /// Per-rank element counts of the intersection of [a, b) with each shard: the recvcounts of a
  /// reduce_scatter_v of that range (they sum to b - a).
  std::vector<int64_t> split_range(int64_t a, int64_t b) const;
};

/// Σ over the group of a metric (a loss, a count), as bookkeeping: through a duplicate() of the
/// group, so that it is never counted in the group's CommStats (which show the technique's bytes
/// only).
class MetricsReducer {
 public:
  /// Collective over `group` (it duplicates it).
  explicit MetricsReducer(ProcessGroup& group);
  /// Collective. Σ_r local_r over the group's ranks, in f64 (exact for integers below 2^53); the
  /// same value on every rank.
  double sum(double local);

 private:
  std::shared_ptr<ProcessGroup> book_;
};

/// Report rows for measured model-state memory (MemoryTracker, this process) against a plan.
std::vector<ReportRow> memory_rows(const MemoryPlan& plan, const char* params_text,
                                   const char* grads_text, const char* optimizer_text);

/// Mean loss (nats/token) of a global batch of B sequences split evenly over the N ranks of `dp`
/// (the eval_loss of a data-parallel stage with full parameters on every rank): this rank's
/// forward over its B/N sequences, tokens and targets (B/N, T), then the mean of the N local
/// means, summed through `metrics` (not counted in CommStats). Collective over `dp`. `params`:
/// the Ψ parameters in f32, or 16-bit under mixed precision (widened unit by unit as the walk
/// reads them: FlatParams).
double dp_eval_loss(const GPT& model, const Tensor& params, const int32_t* tokens,
                    const int32_t* targets, int global_batch, int T, const ProcessGroup& dp,
                    MetricsReducer& metrics);

/// dst (host, src.numel() floats) = src, an f32 tensor on any device (Allocator::copy).
void to_host(float* dst, const Tensor& src);
/// dst (an f32 tensor on any device) = src (host, dst.numel() floats).
void from_host(const Tensor& dst, const float* src);
/// dst (f32, f16 or bf16, on any device) = round(src[0..dst.numel())) to nearest even, src host
/// fp32 (mixed precision's working copy from a full-precision state): rounded on the host, then
/// one copy up when dst is on a device (2 bytes per element cross for 16-bit, not 4).
void round_from_host(const Tensor& dst, const float* src);

/// The parameters' full-precision state: under mixed precision the fp32 master weights in `opt`,
/// else `params` itself.
const Tensor& full_precision_params(const Tensor& params, AdamW& opt);
/// Overwrites the parameters with the host fp32 values at `src` (params.numel() floats): under
/// mixed precision the master weights, and the 16-bit parameters rounded from them
/// (round_from_host); else params itself (from_host).
void params_from_host(const Tensor& params, AdamW& opt, const float* src);

/// Replicated model state (baseline, naive DP, DDP): this rank's copy is the full state. Copies
/// the Ψ parameters and AdamW's m and v (Ψ floats each) out to the caller's buffers. Under mixed
/// precision the parameters copied are the fp32 master weights (the full-precision state).
void copy_replicated_state_out(const Tensor& params, AdamW& opt, float* params_out, float* m_out,
                               float* v_out);
/// The reverse: overwrites the parameters, m and v with the caller's full state (Ψ floats each);
/// under mixed precision the master weights, and the 16-bit parameters rounded from them.
void copy_replicated_state_in(Tensor& params, AdamW& opt, const float* params_in,
                              const float* m_in, const float* v_in);

/// Sharded state (ZeRO): for each (shard, out) pair, all_gather_v every rank's valid part
/// (count(r) floats at the start of its S-element shard) into the full Ψ floats at `out`, through
/// one Ψ-float kCommBuffers scratch. Collective over `dp`.   sends (N-1)/N · 4Ψ per pair
void gather_shards_out(ProcessGroup& dp, const ShardLayout& shards,
                       std::initializer_list<std::pair<const Tensor*, float*>> states);

/// The reverse, for one rank: copies this rank's valid part of the full Ψ floats at `full`
/// ([begin(r), begin(r) + count(r))) to the start of its shard tensor `shard` (S floats).
void copy_shard_in(const ShardLayout& shards, int rank, const float* full, Tensor& shard);
/// The same for a full Ψ-element tensor of any dtype into a shard of that dtype (ZeRO-3's 16-bit
/// parameter shard cut from the 16-bit initialisation). Throws std::invalid_argument (copy_from)
/// when the dtypes differ.
void copy_shard_in(const ShardLayout& shards, int rank, const Tensor& full, Tensor& shard);

/// ZeRO-1/2's state: replicated parameters (`params`, Ψ elements, f32 or 16-bit) and `opt`'s
/// sharded m and v, plus its sharded fp32 master weights under mixed precision. Writes the full
/// state (Ψ floats each): the parameters (mixed: the gathered master weights), m and v.
/// Collective over `dp`.                       sends (N-1)/N · 4Ψ per sharded state gathered
void copy_sharded_optimizer_state_out(ProcessGroup& dp, const ShardLayout& shards,
                                      const Tensor& params, AdamW& opt, float* params_out,
                                      float* m_out, float* v_out);
/// The reverse, for this rank of `dp`: the replicated parameters (mixed: rounded from the full
/// fp32 state, whose shard becomes the master weights) and the shards of m and v.
void copy_sharded_optimizer_state_in(const ProcessGroup& dp, const ShardLayout& shards,
                                     Tensor& params, AdamW& opt, const float* params_in,
                                     const float* m_in, const float* v_in);

/// The gradient `g` of the elements [a, a + numel(g)) of the flat Ψ buffer, summed over the
/// ranks of `dp` with each rank receiving only the part inside its own shard, written at its
/// place in `grad_shard` (S elements of g's dtype: f32, or 16-bit under mixed precision, summed
/// then in fp32 pair by pair and rounded); nothing when the range misses the shard. Collective
/// over `dp` (ZeRO-2/3: one call per unit as soon as its gradient is final).
///                                     sends (N-1)/N · b·numel(g), b = 4 (f32) or 2 (16-bit)
void reduce_scatter_into_shard(ProcessGroup& dp, const ShardLayout& shards, int64_t a,
                               const Tensor& g, Tensor& grad_shard);

/// ZeRO-2/3's gradient hook on the walk (unit_runner.h): a unit's full gradient exists only from
/// the walk's first "+=" into it until it is final; then it is reduce-scattered into this rank's
/// shard (reduce_scatter_into_shard) and freed. So the full Ψ gradient never exists: at most unit
/// 0 (alive from the tied head to the embedding's backward) and one other unit at a time.
///
/// Mixed precision (a 16-bit grad_shard, Micikevicius et al. 2018): the walk accumulates unit u
/// in an fp32 buffer (MemCategory::kOther, the GEMM's accumulator, as FlatGrads does); when it is
/// final it is rounded once into a 16-bit unit gradient (kGradients, 2·n_u bytes), which is what
/// travels (2 bytes per element) and is freed right after. kGradients then peaks at
/// 2(S + n_u) for the largest unit, the fp32 accumulators (unit 0 and one other) are kOther.
class ReduceScatterGrads : public GradSink {
 public:
  /// The references must outlive the sink. grad_shard: S elements, f32 or 16-bit (f16, bf16);
  /// each unit's part of the shard is overwritten by that unit's reduce-scatter, so one walk
  /// writes all of it once. `stats` (optional, 16-bit only): counts what rounding the unit
  /// gradients did (underflows, overflows; kernels/cpu/convert.h).
  ReduceScatterGrads(const GPTLayout& layout, ProcessGroup& dp, const ShardLayout& shards,
                     Tensor& grad_shard, cpu::RoundStats* stats = nullptr);
  /// Where the units' gradients live (the walk's device); by default beside the shard.
  /// ZeRO-Offload: the walk on the GPU, the shard on the host (the reduce-scatter copies down).
  void set_unit_device(Device d) { unit_device_ = d; }
  /// Allocates unit u's gradient (zeros; f32 kGradients, or the fp32 kOther accumulator of a
  /// 16-bit shard) on first use.
  float* get(int unit) override;
  /// Collective over dp: sends (N-1)/N · b·numel(u) (b = 4 or 2); then frees unit u's gradient.
  void ready(int unit) override;

 private:
  const GPTLayout& layout_;
  ProcessGroup& dp_;
  const ShardLayout& shards_;
  Tensor& grad_shard_;
  cpu::RoundStats* stats_;
  std::vector<Tensor> unit_;  // f32: the gradient; 16-bit shard: the fp32 accumulator
  Device unit_device_;
};

}  // namespace llmp
