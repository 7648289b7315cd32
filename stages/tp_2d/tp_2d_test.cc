// Optimus 2D tensor parallelism (common/tp2d, d = 1) at P = 1 (q = 1) and P = 4 (q = 2) on the
// tiny preset (H = 2: one head per column block at q = 2): against the single-rank baseline,
// every report row against its closed form (tp2d_formulas.h), and the state round trip through
// the whole model's GPT-2 names (tests/tp2d_test_util.h).
#include <gtest/gtest.h>

#include "tests/tp2d_test_util.h"

namespace llmp {
namespace {

TEST(Tp2d, MatchesBaselineWithNonDefaultHyperparameters) { expect_tp2d_matches_baseline(1, 1e-5); }

TEST(Tp2d, EveryReportRowMatchesItsClosedForm) { expect_tp2d_report_ok(1); }

TEST(Tp2d, StateRoundTripAndBaselineCheckpoint) { expect_tp2d_state_round_trip(1, 1e-5); }

// --recompute selective and full (every 1, 2, 3): the same bits, fewer bytes kept, and the
// recomputed forwards' communication and FLOPs as their closed forms.
TEST(Tp2d, RecomputationIsBitIdentical) { expect_tp2d_recomputation_bit_identical(1); }

// --attention flash: lse kept per block instead of P, the same training to rounding.
TEST(Tp2d, FlashAttentionMatchesMaterialized) { expect_tp2d_flash_matches_materialized(1); }

}  // namespace
}  // namespace llmp
