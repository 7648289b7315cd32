// Tesseract 2.5D tensor parallelism (common/tp2d) at (q, d) = (1, 2) on 2 ranks, (2, 1) on 4 and
// (2, 2) on 8, tiny preset: against the single-rank baseline, every report row against its
// closed form (tp2d_formulas.h), and the state round trip (tests/tp2d_test_util.h).
#include <gtest/gtest.h>

#include "tests/stage_test_util.h"
#include "tests/tp2d_test_util.h"

namespace llmp {
namespace {

int depth() { return test_world().size() == 4 ? 1 : 2; }

TEST(Tp2p5d, MatchesBaselineWithNonDefaultHyperparameters) {
  expect_tp2d_matches_baseline(depth(), 1e-5);
}

TEST(Tp2p5d, EveryReportRowMatchesItsClosedForm) { expect_tp2d_report_ok(depth()); }

TEST(Tp2p5d, StateRoundTripAndBaselineCheckpoint) { expect_tp2d_state_round_trip(depth(), 1e-5); }

// --recompute selective and full (every 1, 2, 3): the same bits, fewer bytes kept, and the
// recomputed forwards' communication and FLOPs as their closed forms.
TEST(Tp2p5d, RecomputationIsBitIdentical) { expect_tp2d_recomputation_bit_identical(depth()); }

// --attention flash: lse kept per block instead of P, the same training to rounding.
TEST(Tp2p5d, FlashAttentionMatchesMaterialized) { expect_tp2d_flash_matches_materialized(depth()); }

}  // namespace
}  // namespace llmp
