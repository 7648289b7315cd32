// The naive pipeline against the baseline (p = 2 and 4 ranks, m = 1), its executed bubble
// (logical clock over the real messages) against (p-1)/p, its memory rows, one batch of
// activations in flight, bytes per step. Run on 2 and 4 ranks.
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
  // The executor's logical timeline (F = 1, B = 2): each rank busy 3 of 3p units.
  const int p = testing::pipeline_world().size();
  const testing::ProbeResult r = testing::expect_executed_bubble(
      make, "naive_pp", 1, naive_pp_bubble_fraction(p), "(p-1)/p", 3.0 * p);
  EXPECT_EQ(r.stats.peak_in_flight, 1);
  EXPECT_EQ(static_cast<double>(r.stats.stored_per_forward), r.expected_stored) << "4bTk(16C+HT+4) bytes";
  const double ratio = r.stats.peak_activation_bytes / double(r.stats.stored_per_forward);
  std::printf("naive_pp p=%d rank %d: peak activations %.2f x the batch's stored %lld B\n", r.p,
              r.rank, ratio, static_cast<long long>(r.stats.stored_per_forward));
  EXPECT_GE(ratio, 1.0);
  EXPECT_LT(ratio, 2.0);
  EXPECT_DOUBLE_EQ(r.bytes, r.expected_bytes);
}

TEST(NaivePP, MemoryRowsAreThisRanksShare) {
  testing::expect_memory_rows_match_partition(make, "naive_pp", /*m=*/1);
}

}  // namespace
}  // namespace llmp
