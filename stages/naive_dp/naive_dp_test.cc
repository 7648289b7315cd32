// Naive DP against the baseline, and its memory and traffic against the closed forms.
// Run on 1, 2, 3 and 4 ranks (mpi_test in BUILD).
//
// Glossary: N ranks, Ψ parameter count, B global batch, T sequence length.
#include "stages/naive_dp/naive_dp.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

// Bounds on the largest relative differences against the baseline in the same 16-bit precision
// (10 steps of tiny, B = 12, lr 1e-3), losses and final fp32 master weights bounded apart.
//
// Why they are not bit-identical: the baseline rounds each gradient element to 16 bits once (its
// fp32 sum over the whole batch); here each rank rounds its own partial sum, and the 16-bit
// all_reduce rounds again at every pairwise addition (common/comm: each pair widened, added in
// fp32, rounded). One bf16 ulp is 2^-8 ≈ 3.9e-3 relative, one fp16 ulp 2^-11 ≈ 4.9e-4.
//
// Losses: a gradient element off by an ulp changes Adam's step m̂/(√v̂ + eps) by about that
// relative amount, i.e. a parameter by ~lr·3.9e-3 ≈ 4e-6 per step, which moves the loss by far
// less than 1e-4 relative in 10 steps; measured ≤ 1.4e-5 at N = 1..4 (bf16 and fp16, K = 1, 2).
// Dropping the all_reduce moves the losses by ~5e-3.
//
// Parameters (max |diff| / max |p|, max |p| ≈ 1, the LayerNorm gains): the worst elements are
// those whose true gradient is zero (the key part of c_attn.bias: see tests/equivalence.h). Their
// gradient is rounding noise, which Adam normalises into steps of up to ±lr in a direction the
// rounding decides, so two runs that round differently drift apart by up to 2·lr·steps = 2e-2 on
// those elements alone. Measured in bf16: ≤ 6.4e-3 (N = 3; 0 at N = 1 for naive DP, 3.5e-3 for
// DDP's K = 2, which rounds per micro-step). Bound 1e-2: above every measurement, below that
// worst-case drift and below what a missing all_reduce does (1.5e-2 in fp32). fp16 with
// eps = 1e-6 (see the fp16 test): the noise elements' |g| ≪ eps, so eps damps their steps, and
// the rest differ by fp16 ulps: measured ≤ 4.2e-4; bound 2e-3.
constexpr double kLossBound = 1e-4;
constexpr double kBf16ParamBound = 1e-2;
constexpr double kFp16ParamBound = 2e-3;

// The mixed-precision check of a run_against_baseline result: losses and parameters bounded
// apart (above), the worst tensor named.
void expect_close(const EquivalenceResult& r, double param_bound) {
  EXPECT_LE(r.max_loss_rel, kLossBound) << "losses";
  EXPECT_LE(r.max_param_rel, param_bound) << "parameters (largest |diff| in " << r.worst_param
                                          << ")";
}

StrategyFactory naive_dp_on_world(MixedPrecisionConfig mp = {}) {
  return [mp](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<NaiveDPStrategy>(model, test_world(), opt, seed, mp);
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

// ---- Mixed precision (--precision bf16 / fp16) ----------------------------------------------

// Against the baseline in the same precision. Not bit-identical: the baseline's gradient is
// rounded to 16 bits once (the fp32 sum over the whole batch), naive DP's is rounded once per
// rank (each rank's fp32 partial sum) and then once more at every pairwise addition of the 16-bit
// all_reduce: the bounds and their reasons are above.
TEST(NaiveDP, MatchesBaselineInBf16) {
  EquivalenceConfig cfg;
  cfg.mp = precision_config(TrainPrecision::kBF16);
  const EquivalenceResult r = run_against_baseline(naive_dp_on_world(cfg.mp), test_world(), cfg);
  expect_close(r, kBf16ParamBound);
}

// fp16 with the dynamic loss scaler (S = 2^16) against the fp16 baseline. eps = 1e-6 (default
// 1e-8): Adam's update m/(√v + eps) is invariant to the gradients' scale except through eps, so
// with an eps near the small gradients a stage that stepped on S·g (never unscaled by 1/S) would
// move those parameters by ~lr instead of ~lr·|g|/(|g| + eps), far above the bound.
TEST(NaiveDP, MatchesBaselineInFp16WithDynamicLossScaling) {
  EquivalenceConfig cfg;
  cfg.mp = precision_config(TrainPrecision::kFP16);
  cfg.opt.eps = 1e-6f;
  const EquivalenceResult r = run_against_baseline(naive_dp_on_world(cfg.mp), test_world(), cfg);
  expect_close(r, kFp16ParamBound);
}

// One step in bf16: 16-bit parameters and gradients, an fp32 master copy with m and v, to the
// byte (MemoryTracker), and the all_reduce of the 16-bit gradients (CommStats).
TEST(NaiveDP, MixedPrecisionMemoryAndBytesPerStep) {
  for (TrainPrecision p : {TrainPrecision::kBF16, TrainPrecision::kFP16}) {
    const OneStepMeasurement s =
        measure_one_step(naive_dp_on_world(precision_config(p)), GPTConfig::preset("tiny"),
                         /*global_batch=*/12, /*seed=*/7, /*steps=*/1, {}, storage_dtype(p));
    const int N = test_world().size();
    const ReportRow& sent = report_row(s.rows, "sent per step");
    std::printf("%s, per rank: params %lld B (2Ψ = %lld), grads %lld B (2Ψ), optimizer %lld B "
                "(12Ψ = %lld); sent %.0f B in one step\n",
                to_string(p), static_cast<long long>(s.params), static_cast<long long>(2 * s.psi),
                static_cast<long long>(s.grads), static_cast<long long>(s.optimizer),
                static_cast<long long>(12 * s.psi), sent.measured);
    EXPECT_EQ(s.params, 2 * s.psi) << "16-bit working copy of the parameters: 2Ψ";
    EXPECT_EQ(s.grads, 2 * s.psi) << "16-bit gradients: 2Ψ";
    EXPECT_EQ(s.grads_peak, 2 * s.psi) << "the all_reduce runs in place on the 16-bit gradients";
    EXPECT_EQ(s.optimizer, 12 * s.psi) << "fp32 master weights, m and v: 12Ψ";
    for (const char* what : {"parameters", "gradients", "optimizer state"})
      EXPECT_EQ(report_row(s.rows, what).formula, report_row(s.rows, what).measured) << what;
    // One all_reduce of the 2Ψ-byte buffer: 2(N-1)/N·2Ψ.
    const double expected = 2.0 * (N - 1) / N * (2.0 * s.psi);
    EXPECT_NEAR(sent.measured, expected, 1e-9 * expected) << "not 2 bytes per gradient element";
    EXPECT_DOUBLE_EQ(sent.formula, expected);
    EXPECT_EQ(sent.formula_text, "2(N-1)/N·2Ψ");
  }
}

// fp16's skip, agreed: an overflow injected on the last rank only at step 2 is skipped by every
// rank with the state bit-identical, and step 3 trains (tests/stage_test_util.h).
TEST(NaiveDP, Fp16InjectedOverflowIsSkippedByEveryRank) {
  expect_injected_overflow_skipped_by_every_rank(
      [](const GPT& model) -> std::unique_ptr<MixedPrecisionStrategy> {
        return std::make_unique<NaiveDPStrategy>(model, test_world(), AdamWConfig{}, /*seed=*/7,
                                                 precision_config(TrainPrecision::kFP16));
      },
      [](const MixedPrecisionStrategy& s) -> const Tensor& {
        return static_cast<const NaiveDPStrategy&>(s).params_tensor();
      });
}

}  // namespace
}  // namespace llmp
