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

TEST(Ulysses, RefusesASplitItCannotMake) {
  EXPECT_EQ(UlyssesAttention::split_error(16, 4, 3), "Ulysses: T=16 is not divisible by p=3 ranks");
  EXPECT_NE(UlyssesAttention::split_error(16, 2, 4).find("p=4 does not divide H=2"),
            std::string::npos);
  EXPECT_EQ(UlyssesAttention::split_error(16, 4, 4), "");
}

}  // namespace
}  // namespace llmp
