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

// ---- Mixed precision: the core widened (common/cp/widened_core.h), fp32 inside ----

TEST(RingSelfAttention, MatchesBaselineInBf16) {
  expect_cp_matches_baseline_in(rsa, TrainPrecision::kBF16);
}

TEST(RingSelfAttention, MatchesBaselineInFp16) {
  expect_cp_matches_baseline_in(rsa, TrainPrecision::kFP16);
}

// The chunks (and the accumulators riding with them) stay fp32 in a bf16 run, and so does the
// kept P: the attention bytes and the score peak are the fp32 run's, measured.
TEST(RingSelfAttention, Bf16ReportRowsMatchAndTheRingStaysFp32) {
  const int T = 32, B = 6;
  const std::vector<ReportRow> bf16 = expect_cp_bf16_report_rows_match(rsa, T, B);
  const std::vector<ReportRow> fp32 = expect_cp_report_rows_match(rsa, T, B);
  for (const char* what : {"attention sent/step", "peak attention scores"})
    EXPECT_EQ(report_row(bf16, what).measured, report_row(fp32, what).measured) << what;
}

TEST(RingSelfAttention, Fp16InjectedOverflowIsSkippedByEveryRank) {
  expect_cp_fp16_overflow_skipped_by_every_rank(rsa);
}

TEST(RingSelfAttention, RefusesASplitItCannotMake) {
  EXPECT_EQ(RingSelfAttention::split_error(16, 4, 3),
            "ring self-attention: T=16 is not divisible by p=3 (the contiguous split)");
  EXPECT_EQ(RingSelfAttention::split_error(16, 2, 4), "");
}

}  // namespace
}  // namespace llmp
