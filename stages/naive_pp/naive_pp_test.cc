// The naive pipeline against the baseline (p = 2 and 4 ranks, m = 1), its bubble against
// (p-1)/p, one batch of activations in flight, bytes per step. Run on 2 and 4 ranks.
#include "stages/naive_pp/naive_pp.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "tests/pipeline_test_util.h"

namespace llmp {
namespace {

std::unique_ptr<PipelineStrategy> make(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                       uint64_t seed, int /*m: always 1*/) {
  return make_naive_pp(model, pp, opt, seed);
}

TEST(NaivePP, MatchesBaselineAfterTenSteps) {
  testing::expect_matches_baseline(make, {1}, /*max_rel=*/1e-5);
}

TEST(NaivePP, OneRankBusyAtATime) {
  const testing::ProbeResult r = testing::probe(make, 1);
  const double formula = naive_pp_bubble_fraction(r.p);
  if (r.rank == 0)
    std::printf("naive_pp p=%d: bubble simulated %.4f, formula (p-1)/p = %.4f, measured %.4f "
                "(timing, not asserted)\n",
                r.p, r.sim.bubble_fraction, formula, r.measured_bubble);
  EXPECT_NEAR(r.sim.bubble_fraction, formula, 1e-12);
  EXPECT_EQ(r.stats.peak_in_flight, 1);
  EXPECT_EQ(static_cast<double>(r.stats.stored_per_forward), r.expected_stored) << "4bTk(16C+HT+4) bytes";
  const double ratio = r.stats.peak_activation_bytes / double(r.stats.stored_per_forward);
  std::printf("naive_pp p=%d rank %d: peak activations %.2f x the batch's stored %lld B\n", r.p,
              r.rank, ratio, static_cast<long long>(r.stats.stored_per_forward));
  EXPECT_GE(ratio, 1.0);
  EXPECT_LT(ratio, 2.0);
  EXPECT_DOUBLE_EQ(r.bytes, r.expected_bytes);
}

}  // namespace
}  // namespace llmp
