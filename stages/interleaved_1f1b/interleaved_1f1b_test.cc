// Interleaved 1F1B (v = 2) against the baseline (p = 2 and 4 ranks; m = 4, 8 — m = 1 < p is
// rejected, see BUILD's pipeline_bad_input_test), its executed bubble (logical clock over the real
// messages) against (p-1)/(v·m + p-1), its memory rows, its activation memory against the
// schedule's warm-up depth. Run on 2 and 4 ranks (L = 8: p·v = 4
// and 8 virtual stages).
#include "stages/interleaved_1f1b/interleaved_1f1b.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "tests/pipeline_test_util.h"
#include "common/pipeline/schedule.h"

namespace llmp {
namespace {

constexpr int kChunks = 2;

std::unique_ptr<PipelineStrategy> make(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                       uint64_t seed, int m) {
  return make_interleaved_1f1b(model, pp, opt, seed, m, kChunks);
}

TEST(Interleaved1F1B, MatchesBaselineAfterTenSteps) {
  testing::expect_matches_baseline(make, {4, 8}, /*max_rel=*/1e-5);
}

TEST(Interleaved1F1B, OneMicroBatchIsRejected) {
  // m = 1 < p: Megatron's interleaving takes micro-batches p at a time.
  EXPECT_THROW(interleaved_1f1b(testing::pipeline_world().size(), 1, kChunks),
               std::invalid_argument);
}

TEST(Interleaved1F1B, ExecutedBubbleShrinksByV) {
  // The executor's logical timeline (every chunk op F = 1, B = 2: a chunk is 1/v of a stage,
  // which rescales the unit, not the fraction): fill and drain take (p-1)(F+B) of a makespan
  // (v·m + p-1)(F+B), against 1F1B's (m + p-1)(F+B) in the same unit.
  const int p = testing::pipeline_world().size();
  for (int m : {4, 8}) {
    const testing::ProbeResult r = testing::expect_executed_bubble(
        make, "interleaved_1f1b", m, interleaved_bubble_fraction(p, m, kChunks),
        "(p-1)/(v·m+p-1)", 3.0 * (kChunks * m + p - 1));
    if (r.rank == 0 && p > 1) {
      EXPECT_LT(r.executed_bubble, (p - 1.0) / (m + p - 1.0));
    }
  }
}

TEST(Interleaved1F1B, MemoryRowsAreThisRanksShare) {
  testing::expect_memory_rows_match_partition(make, "interleaved_1f1b", /*m=*/4);
}

TEST(Interleaved1F1B, ActivationsFollowTheWarmUp) {
  for (int m : {4, 8}) {
    const testing::ProbeResult r = testing::probe(make, m);
    const int held = interleaved_peak_in_flight(r.p, m, kChunks, r.rank);
    const double a = static_cast<double>(r.stats.stored_per_forward);  // one chunk's
    const double ratio = r.stats.peak_activation_bytes / a;
    std::printf("interleaved p=%d m=%d rank %d: peak activations %lld B = %.2f x one chunk's "
                "%lld B; chunks in flight %d (simulated %d, formula %d)\n",
                r.p, m, r.rank, static_cast<long long>(r.stats.peak_activation_bytes), ratio,
                static_cast<long long>(r.stats.stored_per_forward), r.stats.peak_in_flight,
                r.sim.peak_in_flight[r.rank], held);
    EXPECT_EQ(r.stats.peak_in_flight, held);
    EXPECT_EQ(static_cast<double>(r.stats.stored_per_forward), r.expected_stored) << "4bTk(16C+HT+4) bytes";
    EXPECT_EQ(r.sim.peak_in_flight[r.rank], held);
    EXPECT_GE(ratio, held);
    EXPECT_LT(ratio, held + 2.0);  // + backward and head workspace (a chunk is half a stage)
  }
}

TEST(Interleaved1F1B, BytesSentPerStepMatchTheSchedule) {
  testing::expect_bytes_match_schedule(make, "interleaved", /*m=*/4);
}

TEST(Interleaved1F1B, StateRoundTripAndValidationLoss) {
  // get_state gathers the stages' ranges (and not the last rank's wte copy); set_state scatters
  // them (the copy included); eval_loss is a forward-only pass through the pipe.
  EXPECT_LE(testing::state_and_eval_check(make, 4), 1e-6);
}

}  // namespace
}  // namespace llmp
