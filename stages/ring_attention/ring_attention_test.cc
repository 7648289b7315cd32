// Ring attention (common/cp/ring_attention.h) in the shared context-parallel strategy against the
// single-rank baseline, with both causal splits; its report rows against the closed forms; the
// per-rank attention FLOPs of the two splits measured; the state round trip. Run on 1, 2 and 4
// ranks: p = the world size (mpi_test in BUILD).
//
// Glossary: p ranks, B global batch, T sequence length, H heads, c = T/(2p) chunk.
#include "common/cp/ring_attention.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/cp_test_util.h"

namespace llmp {
namespace {

CoreFactory ring(RingAttention::Split split) {
  return [split](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
    return std::make_unique<RingAttention>(g, split);
  };
}

TEST(RingAttention, BalancedMatchesBaselineWithNonDefaultHyperparameters) {
  expect_cp_matches_baseline(ring(RingAttention::Split::kBalanced), 16);
}

TEST(RingAttention, ContiguousMatchesBaseline) {
  expect_cp_matches_baseline(ring(RingAttention::Split::kContiguous), 16);
}

TEST(RingAttention, BalancedMatchesBaselineOnLongerSequences) {
  expect_cp_matches_baseline(ring(RingAttention::Split::kBalanced), 64);
}

// The report's FLOPs row is this rank's measured forward attention work: equal on every rank with
// the balanced split, growing with the rank with the contiguous one (4r + 3 chunk pairs of 2p + 1
// on average), and the score peak is two (T/p)² blocks whatever L, B and H.
TEST(RingAttention, ReportRowsMatchAndTheBalancedSplitEqualisesTheWork) {
  const int p = test_world().size(), r = test_world().rank(), T = 32, B = 6;
  const double c = T / (2.0 * p), A = 32, L = 2;
  for (auto split : {RingAttention::Split::kBalanced, RingAttention::Split::kContiguous}) {
    const std::vector<ReportRow> rows = expect_cp_report_rows_match(ring(split), T, B);
    const double pairs = split == RingAttention::Split::kBalanced ? 2 * p + 1 : 4 * r + 3;
    EXPECT_EQ(report_row(rows, "attention fwd FLOPs/step").measured, L * 4 * B * c * c * A * pairs);
    EXPECT_EQ(report_row(rows, "peak attention scores").measured, 8.0 * (T / p) * (T / p));
  }
}

TEST(RingAttention, StateRoundTrip) { expect_cp_state_round_trip(ring(RingAttention::Split::kBalanced)); }

// ---- Mixed precision: the core widened (common/cp/widened_core.h), fp32 inside ----

TEST(RingAttention, MatchesBaselineInBf16) {
  expect_cp_matches_baseline_in(ring(RingAttention::Split::kBalanced), TrainPrecision::kBF16);
}

TEST(RingAttention, MatchesBaselineInFp16) {
  expect_cp_matches_baseline_in(ring(RingAttention::Split::kBalanced), TrainPrecision::kFP16);
}

// The ring still moves fp32 K|V blocks and accumulators in a bf16 run: its bytes and score peak
// are the fp32 run's, measured; the model states and the gradient all_reduce are 16-bit.
TEST(RingAttention, Bf16ReportRowsMatchAndTheRingStaysFp32) {
  const int T = 32, B = 6;
  const CoreFactory make = ring(RingAttention::Split::kBalanced);
  const std::vector<ReportRow> bf16 = expect_cp_bf16_report_rows_match(make, T, B);
  const std::vector<ReportRow> fp32 = expect_cp_report_rows_match(make, T, B);
  for (const char* what : {"attention sent/step", "peak attention scores"})
    EXPECT_EQ(report_row(bf16, what).measured, report_row(fp32, what).measured) << what;
}

TEST(RingAttention, Fp16InjectedOverflowIsSkippedByEveryRank) {
  expect_cp_fp16_overflow_skipped_by_every_rank(ring(RingAttention::Split::kBalanced));
}

TEST(RingAttention, RefusesASplitItCannotMake) {
  EXPECT_EQ(RingAttention::split_error(20, 4, 4),
            "ring attention: T=20 is not divisible by 2p=8 (chunks of the causal split)");
  EXPECT_EQ(RingAttention::split_error(16, 2, 4), "");
}

}  // namespace
}  // namespace llmp
