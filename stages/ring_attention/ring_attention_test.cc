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

// --recompute full: every block's forward ring runs again, the result to the bit.
TEST(RingAttention, FullRecomputationIsBitIdentical) {
  expect_cp_full_recomputation_bit_identical(ring(RingAttention::Split::kBalanced));
  expect_cp_full_recomputation_bit_identical(ring(RingAttention::Split::kContiguous),
                                             TrainPrecision::kBF16);
}

// ---- Mixed precision: 16-bit K|V blocks, fp32 math and accumulators (ring_attention.cc) ----

TEST(RingAttention, MatchesBaselineInBf16) {
  expect_cp_matches_baseline_in(ring(RingAttention::Split::kBalanced), TrainPrecision::kBF16);
}

TEST(RingAttention, MatchesBaselineInFp16) {
  expect_cp_matches_baseline_in(ring(RingAttention::Split::kBalanced), TrainPrecision::kFP16);
}

// In bf16 the K|V blocks travel in 16 bits and the dK|dV accumulators in fp32: per block
// 2(p − 1) half-size blocks and p full-size accumulators, (2p − 1)/(3p − 2) of the fp32 run's
// bytes, measured (CommStats); the score blocks are fp32 in both.
TEST(RingAttention, Bf16ReportRowsMatchAndTheKvBlocksHalve) {
  const int T = 32, B = 6, p = test_world().size();
  const CoreFactory make = ring(RingAttention::Split::kBalanced);
  const std::vector<ReportRow> bf16 = expect_cp_bf16_report_rows_match(make, T, B);
  const std::vector<ReportRow> fp32 = expect_cp_report_rows_match(make, T, B);
  const double sent32 = report_row(fp32, "attention sent/step").measured;
  EXPECT_EQ(report_row(bf16, "attention sent/step").measured,
            p == 1 ? 0.0 : sent32 * (2 * p - 1) / (3 * p - 2));
  EXPECT_EQ(report_row(bf16, "peak attention scores").measured,
            report_row(fp32, "peak attention scores").measured);
}

/// Ring attention told it cannot take 16-bit tensors: the strategy runs it in a WidenedCore
/// (common/cp/widened_core.h), fp32 inside, its blocks fp32 on the ring.
struct WidenedRing : RingAttention {
  using RingAttention::RingAttention;
  bool takes_16bit() const override { return false; }
};

// The 16-bit blocks are exact (they hold 16-bit values) and the math is fp32 on the same widened
// values either way: the native 16-bit ring is the widened fp32 core, bit for bit, with fewer
// bytes sent.
TEST(RingAttention, Bf16RingIsTheWidenedFp32CoreBitForBit) {
  for (auto split : {RingAttention::Split::kBalanced, RingAttention::Split::kContiguous})
    expect_cp_runs_bit_identical(
        ring(split),
        [split](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
          return std::make_unique<WidenedRing>(g, split);
        },
        TrainPrecision::kBF16);
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
