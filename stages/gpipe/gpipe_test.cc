// GPipe against the baseline (p = 2 and 4 ranks; m = 1, 4, 8), its executed bubble (logical
// clock over the real messages) against (p-1)/(m+p-1), its activation memory against "all m
// micro-batches", its memory rows against its share of the model, bytes per step, and a
// schedule whose p does not match the ranks. Run on 1, 2 and 4 ranks (mpi_test in BUILD).
#include "stages/gpipe/gpipe.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "tests/pipeline_test_util.h"
#include "common/pipeline/schedule.h"
#include "common/testing/subprocess.h"

namespace llmp {
namespace {

using testing::pipeline_world;

std::unique_ptr<PipelineStrategy> make(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                       uint64_t seed, int m) {
  return make_gpipe(model, pp, opt, seed, m);
}

TEST(GPipe, MatchesBaselineAfterTenSteps) {
  testing::expect_matches_baseline(make, {1, 4, 8}, /*max_rel=*/1e-5);
}

TEST(GPipe, ExecutedBubbleIsPMinusOneOverMPlusPMinusOne) {
  // The executor's logical timeline (F = 1, B = 2, recvs wait for their message's time): the
  // pipe fills and drains once, makespan (m+p-1)(F+B).
  const int p = pipeline_world().size();
  for (int m : {1, 4, 8})
    testing::expect_executed_bubble(make, "gpipe", m, gpipe_bubble_fraction(p, m),
                                    "(p-1)/(m+p-1)", 3.0 * (m + p - 1));
}

TEST(GPipe, MemoryRowsAreThisRanksShare) {
  testing::expect_memory_rows_match_partition(make, "gpipe", /*m=*/4);
}

TEST(GPipe, EveryRankHoldsAllMicroBatches) {
  for (int m : {1, 4, 8}) {
    const testing::ProbeResult r = testing::probe(make, m);
    const double a = static_cast<double>(r.stats.stored_per_forward);
    const double ratio = r.stats.peak_activation_bytes / a;
    std::printf("gpipe p=%d m=%d rank %d: peak activations %lld B = %.2f x one micro-batch's "
                "%lld B; in flight %d (simulated %d)\n",
                r.p, m, r.rank, static_cast<long long>(r.stats.peak_activation_bytes), ratio,
                static_cast<long long>(r.stats.stored_per_forward), r.stats.peak_in_flight,
                r.sim.peak_in_flight[r.rank]);
    EXPECT_EQ(r.stats.peak_in_flight, gpipe_peak_in_flight(r.p, m, r.rank));
    EXPECT_EQ(static_cast<double>(r.stats.stored_per_forward), r.expected_stored) << "4bTk(16C+HT+4) bytes";
    EXPECT_EQ(r.stats.peak_in_flight, r.sim.peak_in_flight[r.rank]);
    // m micro-batches stored, plus less than one micro-batch of backward/head workspace.
    EXPECT_GE(ratio, m);
    EXPECT_LT(ratio, m + 1.0);
  }
}

TEST(GPipe, BytesSentPerStepMatchTheSchedule) {
  testing::expect_bytes_match_schedule(make, "gpipe", /*m=*/4);
}

// The child job of ScheduleForOtherRanksIsRejected: a 4-stage schedule on 2 ranks.
TEST(GPipe, WrongWorldSizeChild) {
  if (!std::getenv("LLMP_PIPELINE_CHILD")) GTEST_SKIP() << "only in the child job";
  GPTConfig c = GPTConfig::preset("tiny");
  c.layers = 8;
  const GPT model(c);
  PipelineStrategy s(model, pipeline_world(), AdamWConfig{}, 1, gpipe(4, 4));
  ADD_FAILURE() << "a 4-stage schedule was accepted on " << pipeline_world().size() << " ranks";
}

TEST(GPipe, ScheduleForOtherRanksIsRejected) {
  if (!llmp::testing::single_rank()) GTEST_SKIP() << "starts a child job; runs in the np1 variant";
  const auto r = llmp::testing::run_self({"LLMP_PIPELINE_CHILD=1"},
                                         {"--ranks=2", "--gtest_filter=GPipe.WrongWorldSizeChild"});
  std::printf("child exit %d, output:\n%s", r.status, r.output.c_str());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("error: the gpipe schedule has p = 4 pipeline stages but the pipeline "
                          "group has 2 ranks"),
            std::string::npos);
  size_t errors = 0;
  for (size_t at = r.output.find("error: "); at != std::string::npos;
       at = r.output.find("error: ", at + 1))
    ++errors;
  EXPECT_EQ(errors, 1u) << "one line from one rank";
}

}  // namespace
}  // namespace llmp
