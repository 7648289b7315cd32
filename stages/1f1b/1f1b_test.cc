// 1F1B against the baseline (p = 2 and 4 ranks; m = 1, 4, 8), its executed bubble (logical clock
// over the real messages) against (p-1)/(m+p-1), its memory rows, and its activation memory: rank r holds min(p-r, m) micro-batches, at most p,
// whatever m (GPipe: m). Run on 2 and 4 ranks (mpi_test in BUILD).
#include "stages/1f1b/1f1b.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "tests/pipeline_test_util.h"

namespace llmp {
namespace {

std::unique_ptr<PipelineStrategy> make(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                       uint64_t seed, int m) {
  return make_one_f_one_b(model, pp, opt, seed, m);
}

TEST(OneFOneB, MatchesBaselineAfterTenSteps) {
  testing::expect_matches_baseline(make, {1, 4, 8}, /*max_rel=*/1e-5);
}

TEST(OneFOneB, ExecutedBubbleIsPMinusOneOverMPlusPMinusOne) {
  // The executor's logical timeline (F = 1, B = 2, recvs wait for their message's time):
  // GPipe's bubble, makespan (m+p-1)(F+B). (A GPipe order passes this too: the in-flight test
  // below is what tells them apart.)
  const int p = testing::pipeline_world().size();
  for (int m : {1, 4, 8})
    testing::expect_executed_bubble(make, "1f1b", m, one_f_one_b_bubble_fraction(p, m),
                                    "(p-1)/(m+p-1)", 3.0 * (m + p - 1));
}

TEST(OneFOneB, MemoryRowsAreThisRanksShare) {
  testing::expect_memory_rows_match_partition(make, "1f1b", /*m=*/4);
}

TEST(OneFOneB, ActivationsBoundedByPipelineDepth) {
  for (int m : {1, 4, 8}) {
    const testing::ProbeResult r = testing::probe(make, m);
    const int held = one_f_one_b_peak_in_flight(r.p, m, r.rank);
    const double a = static_cast<double>(r.stats.stored_per_forward);
    const double ratio = r.stats.peak_activation_bytes / a;
    std::printf("1f1b p=%d m=%d rank %d: peak activations %lld B = %.2f x one micro-batch's "
                "%lld B; in flight %d (simulated %d, formula min(p-r, m) = %d)\n",
                r.p, m, r.rank, static_cast<long long>(r.stats.peak_activation_bytes), ratio,
                static_cast<long long>(r.stats.stored_per_forward), r.stats.peak_in_flight,
                r.sim.peak_in_flight[r.rank], held);
    EXPECT_EQ(r.stats.peak_in_flight, held);
    EXPECT_EQ(static_cast<double>(r.stats.stored_per_forward), r.expected_stored) << "4bTk(16C+HT+4) bytes";
    EXPECT_EQ(r.sim.peak_in_flight[r.rank], held);
    // min(p-r, m) micro-batches stored, plus less than one micro-batch of backward/head workspace:
    // never more than p (+1), even at m = 8 where GPipe holds 8.
    EXPECT_GE(ratio, held);
    EXPECT_LT(ratio, held + 1.0);
    EXPECT_LE(ratio, std::min(r.p, m) + 1.0);
  }
}

TEST(OneFOneB, BytesSentPerStepMatchTheSchedule) {
  testing::expect_bytes_match_schedule(make, "1f1b", /*m=*/8);
}

TEST(OneFOneB, StateRoundTripAndValidationLoss) {
  // get_state gathers the stages' ranges (and not the last rank's wte copy); set_state scatters
  // them (the copy included); eval_loss is a forward-only pass through the pipe.
  EXPECT_LE(testing::state_and_eval_check(make, 4), 1e-6);
}

}  // namespace
}  // namespace llmp
