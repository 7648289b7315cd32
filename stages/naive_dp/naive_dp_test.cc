// Naive DP against the baseline, and its memory and traffic against the closed forms.
// Run on 1, 2, 3 and 4 ranks (mpi_test in BUILD).
//
// Glossary: N ranks, Ψ parameter count, B global batch, T sequence length.
#include "stages/naive_dp/naive_dp.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

StrategyFactory naive_dp_on_world() {
  return [](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<NaiveDPStrategy>(model, test_world(), opt, seed);
  };
}

TEST(NaiveDP, MatchesBaselineAfterTenSteps) {
  // tiny preset, global batch 12, T = 16, 10 steps (EquivalenceConfig's defaults).
  expect_equivalent(run_against_baseline(naive_dp_on_world(), test_world()), /*max_rel=*/1e-5);
}

// Non-default learning rate and weight decay (baseline with the same): a stage that dropped
// either would drift from the baseline by about lr·λ per step.
TEST(NaiveDP, MatchesBaselineWithNonDefaultHyperparameters) {
  EquivalenceConfig cfg = non_default_hyperparameters();
  cfg.steps = 6;
  expect_equivalent(run_against_baseline(naive_dp_on_world(), test_world(), cfg), /*max_rel=*/1e-5);
}

// One training step of a fresh NaiveDPStrategy on the tiny model: the model-state bytes it
// added to this process (deltas around its construction) and its report.
OneStepMeasurement one_step() {
  return measure_one_step(naive_dp_on_world(), GPTConfig::preset("tiny"), /*global_batch=*/12,
                          /*seed=*/7);
}

TEST(NaiveDP, PerRankMemoryEqualsTheFormulaInBytes) {
  const OneStepMeasurement s = one_step();
  const int N = test_world().size();
  const MemoryPlan plan = plan_memory(DPStage::kNaiveDP, s.psi, N, Precision::fp32());
  std::printf("per rank: params %lld B (4Ψ = %.0f), grads %lld B (4Ψ = %.0f), optimizer %lld B "
              "(8Ψ = %.0f): the same on every one of the %d ranks\n",
              static_cast<long long>(s.params), plan.params, static_cast<long long>(s.grads),
              plan.grads, static_cast<long long>(s.optimizer), plan.optimizer, N);
  EXPECT_EQ(s.params, 4 * s.psi) << "full replica of the parameters: 4Ψ";
  EXPECT_EQ(s.grads, 4 * s.psi) << "full replica of the gradients: 4Ψ";
  EXPECT_EQ(s.optimizer, 8 * s.psi) << "full replica of AdamW's m and v: 8Ψ";
  EXPECT_EQ(static_cast<double>(s.params + s.grads + s.optimizer), plan.total());
  for (const char* what : {"parameters", "gradients", "optimizer state"})
    EXPECT_EQ(report_row(s.rows, what).formula, report_row(s.rows, what).measured) << what;
}

// Every category together: the all_reduce works in place on the gradient buffer, so nothing is
// held beyond the model states and the walk; a hidden buffer (any category) shows here.
TEST(NaiveDP, TotalPeakIsTheModelStatesPlusTheWalk) {
  expect_total_peak_within_plan(one_step(), DPStage::kNaiveDP, GPTConfig::preset("tiny"), 0,
                                "nothing");
}

TEST(NaiveDP, BytesSentPerStepEqualOneAllReduceOfTheGradients) {
  const OneStepMeasurement s = one_step();
  const int N = test_world().size();
  const ReportRow& sent = report_row(s.rows, "sent per step");
  const double expected = 2.0 * (N - 1) / N * s.psi * 4;  // one all_reduce of 4Ψ bytes
  std::printf("rank sent %.0f bytes in one step, formula 2(N-1)/N·4Ψ = %.0f\n", sent.measured,
              expected);
  EXPECT_NEAR(sent.measured, expected, 1e-9 * expected);
  EXPECT_DOUBLE_EQ(sent.formula, expected);
}

}  // namespace
}  // namespace llmp
