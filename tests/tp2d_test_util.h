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

/// Activation recomputation (gpt_2p5d.h) against none on tiny with L = 4 (B = 12): selective,
/// and full every 1, 2 and 3 blocks. Three steps from the same seed on the same batches: every
/// loss and the final state (parameters, m, v) bit for bit the same; L blocks (full) or L
/// softmax probabilities (selective) made again per step (RecomputeMeter); every report row, the
/// recomputed FLOPs row of common/train/recompute_report.h included, equal to its closed form;
/// fewer activation bytes kept per block; under full, more sent on the row and column groups
/// than without (q > 1), under selective the same.
void expect_tp2d_recomputation_bit_identical(int depth);

/// --attention flash against materialized on tiny with L = 4 (B = 12), without and with full
/// recomputation: the checks of tests/own_walk_checks.h (losses within 1e-6, state within 1e-5,
/// every row its closed form, lse kept instead of P, the same bytes sent).
void expect_tp2d_flash_matches_materialized(int depth);

}  // namespace llmp
