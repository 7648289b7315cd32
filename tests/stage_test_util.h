// Test helpers shared by the data-parallel stages' tests (naive_dp, ddp, zero1, zero2, zero3):
// one world group for the whole test binary, the check of an equivalence run, a report row by
// name, and a short training run of a fresh strategy that measures the model-state bytes it adds
// to this process (MemoryTracker) next to what its report() says, that report's rows checked
// against what MemoryTracker and CommStats recorded, and the bound on the total per-rank peak over
// every memory category (ZeRO's Table 1 + the walk measured alone + a stated in-flight term). The
// pipeline stages have their own: tests/pipeline_test_util.h.
//
// Glossary: Ψ parameter count, B global batch (sequences), T sequence length (the preset's ctx).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/plan/memory_planner.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"
#include "tests/equivalence.h"

namespace llmp {

/// The world (every rank) as one ProcessGroup for the whole test binary. ProcessGroup::world()
/// returns a new group on every call, and a strategy keeps a reference to its group, so the group
/// must outlive every strategy: this one lives until the binary exits.
ProcessGroup& test_world();

/// Expects (gtest EXPECT, non-fatal) the largest relative differences of a run_against_baseline
/// result, over the losses and over the parameters, to be at most `max_rel`; a parameter failure
/// names the worst tensor.
void expect_equivalent(const EquivalenceResult& r, double max_rel);

/// The row of `rows` whose `what` is `what` ("parameters", "sent per step", ...).
/// Throws std::runtime_error("no report row <what>") when there is none.
const ReportRow& report_row(const std::vector<ReportRow>& rows, const std::string& what);

/// Expects (gtest EXPECT) each row of a data-parallel report() to hold what was recorded, not its
/// formula: "parameters", "gradients", "optimizer state" = MemoryTracker::current of that
/// category now; "parameters, peak in step", "gradients, peak in step" = its peak since the last
/// step began; "sent per step" = `sent`, the bytes test_world()'s CommStats counted in the last
/// step. At least the three memory rows must be there. measure_one_step calls it on every report.
void expect_report_is_measured(const std::vector<ReportRow>& rows, double sent);

/// What measure_one_step measured. Bytes are this process's MemoryTracker figures after the last
/// step, less those before the strategy was built: what the strategy itself holds.
struct OneStepMeasurement {
  int64_t psi = 0;            ///< Ψ of the model
  int64_t params = 0;         ///< kParameters bytes added
  int64_t grads = 0;          ///< kGradients bytes added
  int64_t optimizer = 0;      ///< kOptimizerState bytes added (AdamW's m and v)
  int64_t grads_peak = 0;     ///< peak kGradients during the last step, less the bytes before
  int64_t params_before = 0;  ///< kParameters bytes before the strategy was built
  /// Peak of ALL categories together during the last step (MemoryTracker::peak_total), less the
  /// total before the strategy was built: everything the strategy and its walk held at the worst
  /// moment, whatever category a buffer was booked under.
  int64_t total_peak = 0;
  int local_batch = 0;        ///< this rank's sequences per step (batch_slice(B).num_seqs)
  std::vector<ReportRow> rows;  ///< the strategy's report() after the last step
};

/// Called with the strategy and its model once the measurement is taken, while both are alive:
/// for figures only one stage has (dynamic_cast the strategy to it), or an evaluation.
using StrategyInspector = std::function<void(Strategy& strategy, const GPT& model)>;

/// Collective over the factory's group. Builds the GPT of `config` and a fresh strategy with
/// `make` (default AdamWConfig, `seed`), trains it for `steps` steps (step s on training batch s
/// of /usr/share/games/fortunes sampled with `seed`; B = global_batch, T = config.ctx, this
/// rank's batch_slice), and returns the bytes of the three model-state categories it added, its
/// report() (its rows checked by expect_report_is_measured) and Ψ. Then, as train_main ends a
/// run, it calls finish() (a stage's end-of-run lines land in the test log), and last `inspect`
/// when given. steps > 1 measures a step that runs with
/// the optimizer state already allocated. `activations`: the GPT's activation dtype, the storage
/// dtype of the precision the factory's strategy trains in (bf16 / f16 for mixed precision).
OneStepMeasurement measure_one_step(const StrategyFactory& make, GPTConfig config,
                                    int global_batch, uint64_t seed, int steps = 1,
                                    const StrategyInspector& inspect = {},
                                    DType activations = DType::kF32);

/// Bytes the walk itself needs: the peak of all MemoryTracker categories together during one
/// plain forward_backward (common/nn/unit_runner.h, no stage involved) of `B` sequences of
/// config.ctx tokens, with its parameter and gradient buffers allocated beforehand, less the
/// bytes before: activations and the walk's scratch. The part of a data-parallel rank's peak that
/// the ZeRO paper's model-state table leaves out.
int64_t walk_peak_bytes(const GPTConfig& config, int B);

/// Elements of the largest of units 1..L+1 (every unit but the embeddings).
int64_t largest_unit_after_embeddings(const GPTLayout& layout);

/// Expects (gtest EXPECT) the total per-rank peak of `m` (all categories) to be at most
///   plan_memory(stage, Ψ, N, fp32, padded).total()   the model states (ZeRO Table 1)
///   + walk_peak_bytes(config, m.local_batch)          the walk's activations, measured alone
///   + transient_bytes                                 what the stage states it holds in flight
/// and the slack left under that bound to be less than 4Ψ, so that one hidden full-Ψ fp32 buffer,
/// in any category, fails the test. Prints every term. `transient_text` names the transient.
void expect_total_peak_within_plan(const OneStepMeasurement& m, DPStage stage,
                                   const GPTConfig& config, int64_t transient_bytes,
                                   const std::string& transient_text);

/// measure_one_step of a ZeRO stage, with its shard size.
struct ShardedStepMeasurement : OneStepMeasurement {
  int64_t shard = 0;  ///< S = ⌈Ψ/N⌉ as the strategy laid out its shards (shards().padded)
};

/// measure_one_step for a strategy of class `ZeroStrategy` (one with shards(): zero1, zero2,
/// zero3) that `make` builds; reads its shard size before calling `inspect`.
template <class ZeroStrategy>
ShardedStepMeasurement measure_sharded_step(const StrategyFactory& make, GPTConfig config,
                                            int global_batch, uint64_t seed, int steps = 1,
                                            const StrategyInspector& inspect = {}) {
  ShardedStepMeasurement m;
  static_cast<OneStepMeasurement&>(m) = measure_one_step(
      make, config, global_batch, seed, steps, [&](Strategy& s, const GPT& model) {
        m.shard = dynamic_cast<const ZeroStrategy&>(s).shards().padded;
        if (inspect) inspect(s, model);
      });
  return m;
}

/// A MixedPrecisionConfig in precision `p` (fp16: the dynamic scaler's defaults, S = 2^16,
/// window 1000).
MixedPrecisionConfig precision_config(TrainPrecision p);

/// fp16's skip, agreed: MixedPrecision's test hook multiplies step 2's loss scale by 2^64 on the
/// LAST rank of test_world() only, so only its gradients overflow to inf. Every rank must skip
/// step 2: the loss scale halves everywhere, the 16-bit parameters (read by `params16`), the
/// fp32 master weights, m and v stay bit-identical through the step, and step 3 trains again.
/// `make` builds the data-parallel strategy under test on the tiny fp16 model it is given (with
/// the hook set while it is built). Collective over test_world(); gtest EXPECTs.
/// `config`: the model (tiny by default; its ctx is T).
void expect_injected_overflow_skipped_by_every_rank(
    const std::function<std::unique_ptr<MixedPrecisionStrategy>(const GPT& model)>& make,
    const std::function<const Tensor&(const MixedPrecisionStrategy&)>& params16,
    const GPTConfig& config = GPTConfig::preset("tiny"));

}  // namespace llmp
