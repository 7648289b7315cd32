// DDP against the baseline (one bucket, several buckets, gradient accumulation), and its memory
// and traffic against the closed forms, in fp32. Run on 1, 2, 3 and 4 ranks (mpi_test in BUILD).
// The same under --precision bf16 / fp16: ddp_mixed_precision_test.cc.
//
// Glossary: N ranks, Ψ parameter count, B global batch, T sequence length, K micro-steps.
#include "stages/ddp/ddp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

// 0.04 MiB = 41,943 bytes: tiny's units are 256 B (ln_f), 50,816 B (a block) and 34,816 B
// (embeddings), so the buckets are {ln_f, block 1}, {block 0}, {embeddings}: three buckets, one of
// two units.
constexpr double kSmallBucketMb = 0.04;

StrategyFactory ddp_on_world(DDPOptions o) {
  return [o](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<DDPStrategy>(model, test_world(), opt, seed, o);
  };
}


TEST(DDP, MatchesBaselineAfterTenSteps) {
  // Default buckets: tiny (137 KB of gradients) fits in one 0.5 MiB bucket.
  expect_equivalent(run_against_baseline(ddp_on_world({}), test_world()), /*max_rel=*/1e-5);
}

TEST(DDP, MatchesBaselineWithSeveralBuckets) {
  expect_equivalent(run_against_baseline(ddp_on_world({kSmallBucketMb, 1}), test_world()),
                    /*max_rel=*/1e-5);
}

// Non-default learning rate and weight decay (baseline with the same): a stage that dropped
// either would drift from the baseline by about lr·λ per step.
TEST(DDP, MatchesBaselineWithNonDefaultHyperparameters) {
  EquivalenceConfig cfg = non_default_hyperparameters();
  cfg.steps = 6;
  expect_equivalent(run_against_baseline(ddp_on_world({kSmallBucketMb, 1}), test_world(), cfg),
                    /*max_rel=*/1e-5);
}

TEST(DDP, MatchesBaselineWithGradientAccumulation) {
  EquivalenceConfig cfg;
  cfg.global_batch = 24;  // N·K = 2, 4, 6, 8 all divide 24 (12 is not divisible by 4·2)
  expect_equivalent(run_against_baseline(ddp_on_world({kSmallBucketMb, 2}), test_world(), cfg),
                    /*max_rel=*/1e-5);
}

// One training step of a fresh DDPStrategy on the tiny model, global batch B: model-state bytes
// added to this process, gradient bytes at the peak of the step (above the start), the buckets
// and what each micro-step sent.
struct OneStep : OneStepMeasurement {
  std::vector<Bucket> buckets;
  std::vector<double> micro_bytes;
  std::vector<int64_t> micro_calls;
};

OneStep one_step(DDPOptions o, int B = 12) {
  OneStep s;
  static_cast<OneStepMeasurement&>(s) = measure_one_step(
      ddp_on_world(o), GPTConfig::preset("tiny"), B, /*seed=*/7, /*steps=*/1,
      [&s](Strategy& strategy, const GPT&) {
        const auto& ddp = dynamic_cast<const DDPStrategy&>(strategy);
        s.buckets = ddp.buckets();
        s.micro_bytes = ddp.last_micro_step_bytes();
        s.micro_calls = ddp.last_micro_step_calls();
      });
  return s;
}

TEST(DDP, PerRankMemoryEqualsTheFormulaInBytes) {
  const OneStep s = one_step({kSmallBucketMb, 1});
  const int N = test_world().size();
  const MemoryPlan plan = plan_memory(DPStage::kDDP, s.psi, N, Precision::fp32());
  std::printf("per rank: params %lld B (4Ψ), grads %lld B (4Ψ, peak %lld B), optimizer %lld B "
              "(8Ψ), Ψ = %lld\n",
              static_cast<long long>(s.params), static_cast<long long>(s.grads),
              static_cast<long long>(s.grads_peak), static_cast<long long>(s.optimizer),
              static_cast<long long>(s.psi));
  EXPECT_EQ(static_cast<double>(s.params), plan.params);
  EXPECT_EQ(static_cast<double>(s.grads), plan.grads);
  EXPECT_EQ(static_cast<double>(s.optimizer), plan.optimizer);
  EXPECT_EQ(s.grads_peak, 4 * s.psi) << "buckets are views of the gradient buffer: no copies";
  for (const char* what : {"parameters", "gradients", "optimizer state"})
    EXPECT_EQ(report_row(s.rows, what).formula, report_row(s.rows, what).measured) << what;
}

// Every category together: buckets are views of the gradient buffer, so nothing is in flight
// beyond the model states and the walk; a bucket copied out (or any hidden buffer) shows here.
TEST(DDP, TotalPeakIsTheModelStatesPlusTheWalk) {
  const OneStep s = one_step({kSmallBucketMb, 1});
  expect_total_peak_within_plan(s, DPStage::kDDP, GPTConfig::preset("tiny"), 0, "nothing");
}

TEST(DDP, BytesSentPerStepEqualOneAllReduceWhateverTheBuckets) {
  const int N = test_world().size();
  for (double mb : {DDPOptions{}.bucket_mb, kSmallBucketMb, 1e-6}) {
    const OneStep s = one_step({mb, 1});
    const double expected = 2.0 * (N - 1) / N * s.psi * 4;  // Σ_b 2(N-1)/N·4·numel(b)
    const ReportRow& sent = report_row(s.rows, "sent per step");
    std::printf("bucket_mb %g: %zu buckets, %lld all_reduce calls, rank sent %.0f bytes, "
                "formula 2(N-1)/N·4Ψ = %.0f\n",
                mb, s.buckets.size(), static_cast<long long>(s.micro_calls.at(0)), sent.measured,
                expected);
    EXPECT_NEAR(sent.measured, expected, 1e-9 * expected) << "bucket_mb " << mb;
    EXPECT_DOUBLE_EQ(sent.formula, expected);
    EXPECT_EQ(s.micro_calls.at(0), static_cast<int64_t>(s.buckets.size()))
        << "one all_reduce per bucket";
  }
}

// When each bucket's all_reduce starts, read from the strategy's event log of the last step (a
// logical order, the same on every run): the walk's "unit u final" announcements, the launches,
// the end of backward. Which units a bucket holds comes from its element range and the model's
// layout, not from the bucketer's own unit fields. With K = 2 the log is the synchronising
// micro-step's.
TEST(DDP, EachBucketLaunchesOnceItsGradientsAreFinalAndBeforeBackwardEnds) {
  const GPTLayout lay(GPTConfig::preset("tiny"));
  const int U = lay.num_units();
  for (int K : {1, 2}) {
    std::vector<DDPEvent> ev;
    std::vector<Bucket> buckets;
    measure_one_step(ddp_on_world({kSmallBucketMb, K}), GPTConfig::preset("tiny"), /*B=*/24,
                     /*seed=*/7, /*steps=*/1, [&](Strategy& strategy, const GPT&) {
                       const auto& ddp = dynamic_cast<const DDPStrategy&>(strategy);
                       ev = ddp.last_step_events();
                       buckets = ddp.buckets();
                     });
    ASSERT_GE(buckets.size(), 2u) << "overlap needs several buckets";
    std::string order;
    for (const DDPEvent& e : ev)
      order += e.kind == DDPEvent::kUnitFinal        ? " u" + std::to_string(e.index)
               : e.kind == DDPEvent::kBucketLaunched ? " B" + std::to_string(e.index)
                                                     : std::string(" end");
    std::printf("K = %d, %zu buckets, events (u final, B launched):%s\n", K, buckets.size(),
                order.c_str());
    std::vector<int> final_at(U, -1), launched_at(buckets.size(), -1);
    int end_at = -1, last_final = -1;
    for (int i = 0; i < static_cast<int>(ev.size()); ++i) {
      if (ev[i].kind == DDPEvent::kUnitFinal) {
        ASSERT_EQ(final_at.at(ev[i].index), -1) << "unit " << ev[i].index << " announced twice";
        final_at[ev[i].index] = last_final = i;
      } else if (ev[i].kind == DDPEvent::kBucketLaunched) {
        ASSERT_EQ(launched_at.at(ev[i].index), -1) << "bucket " << ev[i].index << " launched twice";
        launched_at[ev[i].index] = i;
      } else {
        end_at = i;
      }
    }
    ASSERT_GE(end_at, 0) << "no end of backward in the log";
    for (int u = 0; u < U; ++u) ASSERT_GE(final_at[u], 0) << "unit " << u << " never final";
    int before_last_final = 0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      ASSERT_GE(launched_at[b], 0) << "bucket " << b << " never launched";
      // The units whose elements the bucket's range [offset, offset + numel) covers.
      int all_final = -1;  // when the last of them was announced
      for (int u = 0; u < U; ++u) {
        const int64_t lo = lay.unit_offset(u), hi = lo + lay.unit_numel(u);
        if (hi <= buckets[b].offset || lo >= buckets[b].offset + buckets[b].numel) continue;
        EXPECT_LT(final_at[u], launched_at[b])
            << "K " << K << ": bucket " << b << " launched before unit " << u << " was final";
        all_final = std::max(all_final, final_at[u]);
      }
      // ... and as soon as they are: before the walk announces anything else.
      for (int i = all_final + 1; i < launched_at[b]; ++i)
        EXPECT_NE(ev[i].kind, DDPEvent::kUnitFinal)
            << "K " << K << ": bucket " << b << " waited past unit " << ev[i].index;
      EXPECT_LT(launched_at[b], end_at) << "K " << K << ": bucket " << b << " after backward";
      before_last_final += launched_at[b] < last_final;
    }
    EXPECT_GE(before_last_final, 1) << "K " << K
                                    << ": no bucket in flight while backward was still computing";
  }
}

TEST(DDP, GradientAccumulationCommunicatesOnlyOnTheLastMicroStep) {
  const int N = test_world().size();
  const OneStep s = one_step({kSmallBucketMb, 2}, /*B=*/24);
  const double expected = 2.0 * (N - 1) / N * s.psi * 4;
  ASSERT_EQ(s.micro_bytes.size(), 2u);
  std::printf("grad_accum 2: micro-step 1 sent %.0f bytes in %lld calls, micro-step 2 sent %.0f "
              "bytes in %lld calls (formula %.0f)\n",
              s.micro_bytes[0], static_cast<long long>(s.micro_calls[0]), s.micro_bytes[1],
              static_cast<long long>(s.micro_calls[1]), expected);
  EXPECT_EQ(s.micro_bytes[0], 0.0) << "no_sync: the first micro-step must not communicate";
  EXPECT_EQ(s.micro_calls[0], 0);
  EXPECT_NEAR(s.micro_bytes[1], expected, 1e-9 * expected);
  EXPECT_EQ(s.micro_calls[1], static_cast<int64_t>(s.buckets.size()));
  EXPECT_NEAR(report_row(s.rows, "sent per step").measured, expected, 1e-9 * expected);
}

}  // namespace
}  // namespace llmp
