// DeepSpeed-Ulysses (common/cp/ulysses.h) against the single-rank baseline, its report rows
// against the closed forms, and its state round trip. Run on 1, 2 and 4 ranks: p = the world
// size (mpi_test in BUILD); the model has H = 4 heads, so p = 4 attends with one head per rank.
//
// Glossary: p ranks, B global batch, T sequence length, H heads.
#include "common/cp/ulysses.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "tests/cp_test_util.h"

namespace llmp {
namespace {

std::unique_ptr<AttentionCore> ulysses(ProcessGroup& g) {
  return std::make_unique<UlyssesAttention>(g);
}

TEST(Ulysses, MatchesBaselineWithNonDefaultHyperparameters) { expect_cp_matches_baseline(ulysses, 16); }

TEST(Ulysses, MatchesBaselineOnLongerSequences) { expect_cp_matches_baseline(ulysses, 64); }

TEST(Ulysses, ReportRowsMatchTheClosedForms) {
  const std::vector<ReportRow> rows = expect_cp_report_rows_match(ulysses, 32, 6);
  // The head split holds H/p heads of whole sequences: the scores fall by p, not by p².
  const int p = test_world().size();
  const ReportRow& scores = report_row(rows, "peak attention scores");
  const double L = 2, B = 6, H = 4, T = 32;
  EXPECT_EQ(scores.measured, 4 * (L * B * H / p * T * T + T * T));
}

TEST(Ulysses, StateRoundTrip) { expect_cp_state_round_trip(ulysses); }

// --recompute full: the all_to_alls of every block's forward run again, the result to the bit.
TEST(Ulysses, FullRecomputationIsBitIdentical) {
  expect_cp_full_recomputation_bit_identical(ulysses);
  expect_cp_full_recomputation_bit_identical(ulysses, TrainPrecision::kBF16);
}

// ---- Mixed precision: the all_to_alls carry the activations' 16 bits ----

// At p = 1 Ulysses is the baseline's arithmetic to the bit: the same kernels on the same 16-bit
// values (P kept in 16 bits and, in bf16, P and dS rounded before their products, as the
// whole-sequence sub-layer does), no all_reduce to round. At p > 1 the bounds of cp_test_util.cc.
TEST(Ulysses, MatchesBaselineInBf16AndFp16) {
  for (TrainPrecision p : {TrainPrecision::kBF16, TrainPrecision::kFP16}) {
    const EquivalenceResult r = expect_cp_matches_baseline_in(ulysses, p);
    if (test_world().size() == 1) {
      EXPECT_EQ(r.max_loss_rel, 0) << to_string(p);
      EXPECT_EQ(r.max_param_rel, 0) << to_string(p) << " (largest in " << r.worst_param << ")";
    }
  }
}

// In bf16 every all_to_all moves 2-byte elements: half the fp32 run's attention bytes, measured
// (CommStats), as are the kept head-split q|k|v and P; the score peak is L blocks' 16-bit P plus
// the backward's fp32 dP of one head.
TEST(Ulysses, Bf16ReportRowsMatchAndTheAllToAllsHalve) {
  const int T = 32, B = 6;
  const std::vector<ReportRow> bf16 = expect_cp_bf16_report_rows_match(ulysses, T, B);
  const std::vector<ReportRow> fp32 = expect_cp_report_rows_match(ulysses, T, B);
  EXPECT_EQ(report_row(bf16, "attention sent/step").measured,
            report_row(fp32, "attention sent/step").measured / 2);
  const int p = test_world().size();
  const double L = 2, H = 4;
  EXPECT_EQ(report_row(bf16, "peak attention scores").measured,
            2 * L * B * H / p * T * T + 4.0 * T * T);
}

TEST(Ulysses, Fp16InjectedOverflowIsSkippedByEveryRank) {
  expect_cp_fp16_overflow_skipped_by_every_rank(ulysses);
}

TEST(Ulysses, RefusesASplitItCannotMake) {
  EXPECT_EQ(UlyssesAttention::split_error(16, 4, 3), "Ulysses: T=16 is not divisible by p=3 ranks");
  EXPECT_NE(UlyssesAttention::split_error(16, 2, 4).find("p=4 does not divide H=2"),
            std::string::npos);
  EXPECT_EQ(UlyssesAttention::split_error(16, 4, 4), "");
}

}  // namespace
}  // namespace llmp
