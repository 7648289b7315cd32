// Ring self-attention (common/cp/ring_self_attention.h) in the shared context-parallel strategy
// against the single-rank baseline, its report rows against the closed forms, and its state
// round trip. Run on 1, 2 and 4 ranks: p = the world size (mpi_test in BUILD).
//
// Glossary: p ranks, B global batch, T sequence length, H heads, L blocks.
#include "common/cp/ring_self_attention.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/cp_test_util.h"

namespace llmp {
namespace {

std::unique_ptr<AttentionCore> rsa(ProcessGroup& g) {
  return std::make_unique<RingSelfAttention>(g);
}

TEST(RingSelfAttention, MatchesBaselineWithNonDefaultHyperparameters) {
  expect_cp_matches_baseline(rsa, 16);
}

TEST(RingSelfAttention, MatchesBaselineOnLongerSequences) { expect_cp_matches_baseline(rsa, 64); }

// Each rank keeps its queries' whole score rows: (L + 1)·4·B·H·T²/p, the baseline's divided by p
// (up to its one (T,T) scratch), and sends 6(p − 1) chunks of B·T/p rows per block.
TEST(RingSelfAttention, ReportRowsMatchTheClosedForms) {
  const int p = test_world().size(), T = 32, B = 6;
  const std::vector<ReportRow> rows = expect_cp_report_rows_match(rsa, T, B);
  const double L = 2, H = 4, A = 32;
  EXPECT_EQ(report_row(rows, "peak attention scores").measured, (L + 1) * 4 * B * H * T * T / p);
  EXPECT_EQ(report_row(rows, "attention sent/step").measured, L * 6 * (p - 1) * 4 * B * T * A / p);
}

TEST(RingSelfAttention, StateRoundTrip) { expect_cp_state_round_trip(rsa); }

TEST(RingSelfAttention, RefusesASplitItCannotMake) {
  EXPECT_EQ(RingSelfAttention::split_error(16, 4, 3),
            "ring self-attention: T=16 is not divisible by p=3 (the contiguous split)");
  EXPECT_EQ(RingSelfAttention::split_error(16, 2, 4), "");
}

}  // namespace
}  // namespace llmp
