// What the tp_2d and tp_2p5d stages' tests share (common/tp2d/tp2d_strategy.h on the test world
// at depth d): the factory, and the checks each stage runs at its grid shapes. Each check uses
// gtest EXPECTs; the stages' test files call them from their TESTs.
//
// Glossary: P ranks, q grid side, d depth, B global batch, T sequence.
#pragma once

#include "tests/equivalence.h"

namespace llmp {

/// Tp2p5dStrategy over test_world() with depth d.
StrategyFactory tp2p5d_on_world(int depth);

/// Against the single-rank baseline (tiny, 4 steps, lr 2e-3, weight decay 0.1): losses and
/// final parameters within max_rel.
void expect_tp2d_matches_baseline(int depth, double max_rel);

/// Two steps of tiny at B = 12, then every report row "ok" (report_row_ok), each required row
/// present, and the memory rows equal to the tracker's bytes.
void expect_tp2d_report_ok(int depth);

/// get_state → set_state → get_state identical, and the next step's loss equal; a baseline
/// checkpoint (SingleRankStrategy after 2 steps) loaded with set_state continues as the baseline
/// does (loss and parameters after one more step within max_rel).
void expect_tp2d_state_round_trip(int depth, double max_rel);

}  // namespace llmp
