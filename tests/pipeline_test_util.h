// Test helpers shared by the pipeline stages' tests (gpipe, 1f1b, interleaved_1f1b, zero_bubble,
// naive_pp, chimera): the equivalence run against the single-rank baseline, a short "probe" run that
// returns what one step measured (the executed logical timeline and its bubble, activation
// memory, bytes; the simulator's replay alongside, for printing), and the memory rows of the
// report against each rank's share of the model counted from the partition.
// The expect_* helpers run one of those and check it with gtest's EXPECT (non-fatal).
//
// The model: the tiny preset with L = 8 layers, so that p·v = 2, 4 or 8 virtual stages all
// divide it; global batch B = 16 (divisible by m = 1, 4 and 8), T = 16, 10 steps.
//
// Glossary: p pipeline stages (= ranks), m micro-batches, v chunks per rank.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/pipeline/pipeline_strategy.h"
#include "tests/equivalence.h"

namespace llmp {
namespace testing {

/// The world (every rank) as a ProcessGroup that outlives every strategy of the test binary.
ProcessGroup& pipeline_world();

/// Builds a pipeline stage with m micro-batches on `pp`.
using PipelineFactory = std::function<std::unique_ptr<PipelineStrategy>(
    const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed, int m)>;

/// tiny, L = 8, B = 16, T = 16, 10 steps, in `precision` (the model stores its activations in
/// that precision's dtype; a factory must then build its stage in the same precision).
EquivalenceConfig pipeline_equivalence_config(TrainPrecision precision = TrainPrecision::kFP32);

/// Collective. run_against_baseline for the stage with m micro-batches (prints a header line),
/// both in `precision`.
EquivalenceResult pipeline_equivalence(const PipelineFactory& make, int m,
                                       TrainPrecision precision = TrainPrecision::kFP32);

/// Collective. pipeline_equivalence for each m of `ms`; expects the largest relative difference
/// of the losses and of the parameters to be at most `max_rel` (failures name m, and the worst
/// tensor for the parameters).
void expect_matches_baseline(const PipelineFactory& make, std::initializer_list<int> ms,
                             double max_rel);

/// What one rank measured in the last of a few steps of a fresh strategy.
struct ProbeResult {
  SimResult sim;                  ///< the schedule with unit costs (printed, not the claim)
  ExecutorStats stats;            ///< this rank's measurements
  double measured_bubble = 0;     ///< rank 0 only: from the gathered wall-clock spans
  double executed_bubble = 0;     ///< rank 0 only: from the gathered logical spans
  double executed_makespan = 0;   ///< rank 0 only: logical units of the stage's clock costs
  double bytes = 0;               ///< this rank, last step
  double expected_bytes = 0;      ///< PipelineStrategy::expected_bytes_per_step
  double expected_stored = 0;     ///< PipelineStrategy::expected_activation_bytes
  int rank = 0, p = 1, m = 1, v = 1;
};

/// Collective. The state round trip and validation: trains `steps` steps of stage A, then
/// (1) a fresh stage B (another seed) takes A's full state with set_state and must give it back
/// with get_state; (2) one more step of A and of B from that state must give the same loss;
/// (3) eval_loss of A must equal the baseline's forward_loss with A's parameters. Returns the
/// largest relative difference of the three checks (0 when exact).
double state_and_eval_check(const PipelineFactory& make, int m, int steps = 3);

/// Collective. Trains `steps` steps of a fresh strategy (the pipeline_equivalence_config model,
/// in `precision`) and returns the last one's figures; rank 0 prints the measured timeline
/// (finish()).
ProbeResult probe(const PipelineFactory& make, int m, int steps = 2,
                  TrainPrecision precision = TrainPrecision::kFP32);

/// Collective. probe(make, m); rank 0 prints the executed bubble fraction and makespan (the
/// logical clock over the executor's real messages, logical_clock.h) next to the paper's
/// `formula` and `makespan` (logical units) and expects both equal (1e-12); also prints the
/// simulator's figure for comparison (not asserted). Returns the probe.
ProbeResult expect_executed_bubble(const PipelineFactory& make, const std::string& stage, int m,
                                   double formula, const std::string& formula_text,
                                   double makespan);

/// Collective. One step of a fresh strategy, then its report(): every rank prints its memory
/// rows and expects parameters = 4Ψ_r, gradients = 4Ψ_r and optimizer state = 8Ψ_r bytes
/// (in bf16/fp16 `precision`: 2Ψ_r, 4Ψ_r (fp32 accumulation), 12Ψ_r (master, m, v))
/// (measured and formula columns), with Ψ_r counted here from the partition's virtual stages
/// (embeddings on virtual stage 0, k blocks each, final LayerNorm on the last, plus the wte copy
/// when the last virtual stage is not on rank 0) and the layout's unit sizes; for Chimera (two
/// pipelines) from p and r alone: stages r and p-1-r, L/p blocks each, embeddings with stage 0,
/// ln_f with stage p-1, no wte copy. A rank that allocates a full-model buffer fails.
void expect_memory_rows_match_partition(const PipelineFactory& make, const std::string& stage,
                                        int m,
                                        TrainPrecision precision = TrainPrecision::kFP32);

/// Collective. probe(make, m); every rank prints "<stage> rank r sent X bytes in one step,
/// formula Y" and expects the bytes it sent in the last step to equal
/// PipelineStrategy::expected_bytes_per_step (sends·4bTC + 4VC on the embedding ranks).
void expect_bytes_match_schedule(const PipelineFactory& make, const std::string& stage, int m);

}  // namespace testing
}  // namespace llmp
