// Chimera (Li & Hoefler 2021, §3) run by the pipeline executor on 2 and 4 ranks (mpi_test in
// BUILD): against the baseline (it is synchronous), its executed bubble (logical clock F = B = 1
// over the real messages) against (p-2)/(2m+p-2), its memory rows (two stages per rank), its
// bytes per step (activations plus the replica pair's all_reduce, also worked by hand), the
// micro-batches in flight per rank (worked by hand), and the checkpoint round trip.
//
// The model: pipeline_equivalence_config (tiny, L = 8, C = 32, V = 256, ctx = 16; B = 16,
// T = 16), so Ψ = (V + ctx)·C + L·(12C² + 13C) + 2C = 8704 + 8·12704 + 64 = 110400.
//
// Glossary: p pipeline stages (ranks), m micro-batches (a multiple of p), b = B/m, T sequence,
// C channels, Ψ_r parameters held by rank r, F forward, B backward (upper case: the down
// pipeline, chunk 0; lower case: the up pipeline, chunk 1).
#include "stages/chimera/chimera.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "tests/pipeline_test_util.h"

namespace llmp {
namespace {

std::unique_ptr<PipelineStrategy> make(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                       uint64_t seed, int m) {
  return make_chimera(model, pp, opt, seed, m);
}

TEST(Chimera, MatchesBaselineAfterTenSteps) {
  // m = 4 and 8 are multiples of p at p = 2 and 4; the replicas' gradients are summed before
  // the step, so the update is the baseline's.
  testing::expect_matches_baseline(make, {4, 8}, /*max_rel=*/1e-5);
}

TEST(Chimera, ExecutedBubbleIsTheFormula) {
  // The executor's logical timeline at the paper's unit costs (F = B = 1 slot): every rank
  // computes 2m slots and idles p - 2, so T = 2m + p - 2 and the bubble (p-2)/(2m+p-2)
  // (1F1B's (p-1)/(m+p-1) at the same costs). At p = 2 the bubble is 0: each of the two ranks
  // holds the whole model twice (down stage r and up stage 1-r), and the two directions keep
  // both busy from the first slot to the last.
  const int p = testing::pipeline_world().size();
  for (int m : {4, 8}) {
    const testing::ProbeResult r = testing::expect_executed_bubble(
        make, "chimera", m, chimera_bubble_fraction(p, m), "(p-2)/(2m+p-2)", 2.0 * m + p - 2);
    if (r.rank == 0) {
      EXPECT_NEAR(r.executed_bubble, (p - 2.0) / (2.0 * m + p - 2.0), 1e-12);
      if (p == 2) {
        EXPECT_EQ(r.executed_bubble, 0.0);
      }
      EXPECT_LT(r.executed_bubble, (p - 1.0) / (m + p - 1.0)) << "1F1B's at the same p, m";
    }
  }
}

TEST(Chimera, MemoryRowsAreTwoStagesPerRank) {
  testing::expect_memory_rows_match_partition(make, "chimera", /*m=*/4);
}

TEST(Chimera, BytesSentPerStepMatchTheSchedule) {
  testing::expect_bytes_match_schedule(make, "chimera", /*m=*/8);
}

TEST(Chimera, BytesSentPerStepWorkedByHand) {
  // m = 4: b = 16/4 = 4, one activation message 4·b·T·C = 4·4·16·32 = 8192 bytes.
  //   p = 2: rank 0 is down stage 0 (sends F's output: sf for micro-batches 0, 2) and up
  //   stage 1 (the last: sends b's input gradient, sb for 1, 3): 4 messages; rank 1 the
  //   mirror image. Both hold the whole model (Ψ_r = Ψ = 110400), and the pair {0, 1}
  //   all-reduces it: 2(N-1)/N·4Ψ_r = 4Ψ = 441600 bytes. Total 32768 + 441600 = 474368.
  //   p = 4: ranks 0, 3 hold stages 0 and 3 (embeddings 8704, 4 blocks of 12704, ln_f 64:
  //   Ψ_r = 59584) and send 2 sf from stage 0 and 2 sb from stage 3: 4·8192 + 4·59584 =
  //   271104. Ranks 1, 2 hold stages 1 and 2 (4 blocks: 50816) and send sf and sb for 2
  //   micro-batches on each: 8·8192 + 4·50816 = 268800.
  const testing::ProbeResult r = testing::probe(make, /*m=*/4);
  std::vector<double> want;
  if (r.p == 2) want = {474368, 474368};
  if (r.p == 4) want = {271104, 268800, 268800, 271104};
  ASSERT_EQ(static_cast<int>(want.size()), r.p) << "worked for p = 2 and 4 only";
  std::printf("chimera p=%d m=4 rank %d: sent %.0f bytes, worked by hand %.0f\n", r.p, r.rank,
              r.bytes, want[r.rank]);
  EXPECT_EQ(r.bytes, want[r.rank]);
}

TEST(Chimera, MicroBatchesInFlightWorkedByHand) {
  // m = 4, one slot per F or B, micro-batches in flight = forwards done minus backwards done
  // (each micro-batch passes ONE chunk of a rank, so micro-batches = micro-batch·chunks here).
  //   p = 4 (chimera.h's timeline; 0, 1 down, 2, 3 up):
  //     rank 0:  F0 F1 .  f2 b2 f3 b3 B0 .  B1    1 2 2 3 2 3 2 1 1 0   peak 3
  //     rank 1:  .  F0 f2 F1 f3 b2 B0 b3 B1 .     0 1 2 3 4 3 2 1 0 0   peak 4
  //     rank 2:  .  f2 F0 f3 F1 B0 b2 B1 b3 .     0 1 2 3 4 3 2 1 0 0   peak 4
  //     rank 3:  f2 f3 .  F0 B0 F1 B1 b2 .  b3    1 2 2 3 2 3 2 1 1 0   peak 3
  //   i.e. per rank (down stage r holds min(p-r, m/2), up stage p-1-r holds min(r+1, m/2),
  //   both at once): 2+1, 2+2, 2+2, 1+2 = 3, 4, 4, 3; the paper's range [p/2+1, p].
  //   p = 2 (0, 2 down, 1, 3 up; no idle slot):
  //     rank 0:  F0 f1 b1 B0 F2 f3 b3 B2          1 2 1 0 1 2 1 0       peak 2
  //     rank 1:  f1 F0 B0 b1 f3 F2 B2 b3          1 2 1 0 1 2 1 0       peak 2
  const testing::ProbeResult r = testing::probe(make, /*m=*/4);
  std::vector<int> want;
  if (r.p == 2) want = {2, 2};
  if (r.p == 4) want = {3, 4, 4, 3};
  ASSERT_EQ(static_cast<int>(want.size()), r.p) << "worked for p = 2 and 4 only";
  const int held = want[r.rank];
  const double a = static_cast<double>(r.stats.stored_per_forward);
  const double ratio = r.stats.peak_activation_bytes / a;
  std::printf("chimera p=%d m=4 rank %d: peak activations %lld B = %.2f x one micro-batch's "
              "%lld B; in flight %d (simulated %d, worked by hand %d)\n",
              r.p, r.rank, static_cast<long long>(r.stats.peak_activation_bytes), ratio,
              static_cast<long long>(r.stats.stored_per_forward), r.stats.peak_in_flight,
              r.sim.peak_in_flight[r.rank], held);
  EXPECT_EQ(r.stats.peak_in_flight, held);
  EXPECT_EQ(r.sim.peak_in_flight[r.rank], held);
  EXPECT_EQ(a, r.expected_stored) << "4bTk(16C+HT+4) bytes, k = L/p";
  // `held` micro-batches stored, plus less than one micro-batch of backward/head workspace.
  EXPECT_GE(ratio, held);
  EXPECT_LT(ratio, held + 1.0);
}

TEST(Chimera, StateRoundTripAndValidationLoss) {
  // get_state gathers the down chunks only (the up chunks are their replicas), so the
  // checkpoint is the whole model once and interchangeable with every stage; set_state fills
  // both chunks; eval_loss is a forward-only pass down the pipe.
  EXPECT_LE(testing::state_and_eval_check(make, 4), 1e-6);
}

}  // namespace
}  // namespace llmp
