// What a stage whose walk is its own (the 2D, 2.5D and 3D tensor-parallel stages:
// common/tp2d/gpt_2p5d.h, common/tp3d/gpt_3d.h) must show for the shared walk's options, which
// it implements again: activation recomputation against none (the same bits, fewer bytes kept,
// what was made and sent again as its closed forms), and flash attention against materialized
// (the same training to rounding, lse kept instead of P).
//
// The stage's test supplies the run (its strategy, its batches); this file holds the checks that
// every such stage must pass, so that they are written once.
//
// Glossary: L layers, k blocks per checkpointed segment (--recompute_every).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/recompute.h"
#include "common/train/strategy.h"

namespace llmp {

/// What one training run of a stage left: its losses, its final state (parameters, m, v: the
/// whole model's, get_state), its report rows (with common/train/recompute_report.h's rows
/// appended, as train_main appends them) and its last step's RecomputeMeter.
struct WalkRun {
  std::vector<double> losses;
  std::vector<float> state;
  std::vector<ReportRow> rows;
  RecomputeMeter meter;
};

/// The rest of a WalkRun once the steps are trained (their `losses`): the last step's
/// RecomputeMeter, the state (s.get_state), s.report() and, as train_main adds them for a stage
/// that does not report them itself, recompute_rows for a 1 × 1 × P grid (P = test_world():
/// each rank of the 2D/2.5D grid or the 3D cube multiplies 1/P of every product of the model).
WalkRun finish_walk_run(Strategy& s, const GPTConfig& config, int global_batch, int T,
                                  std::vector<double> losses);

/// Trains the stage from the same seed on the same batches under config's recompute policy, then
/// evaluates once (train_main validates after the last step, before the report: the kept-bytes
/// row must still be the training forward's).
/// It must set RecomputeMeter::instance() = RecomputeMeter() before each step (as train_main
/// resets it; the walks checked here do not write its forward_* fields).
using WalkTrainer = std::function<WalkRun(const GPTConfig&)>;

/// Trains `config` (recompute none) and then selective, full, full every 2 and full every 3
/// (config.layers ≥ 4 cuts different segments). Expects (gtest) for each: every loss and the
/// state bit for bit the run without recomputation's; config.layers blocks (full) or softmax
/// probabilities (selective) made again in the last step; every report row equal to its closed
/// form, the recomputed FLOPs row present and > 0; "activations per block" below none's. Each of
/// `groups` (report rows of bytes sent): under full more than none's when `sends` (q > 1), else
/// and under selective exactly none's.
void expect_recomputation_bit_identical(const GPTConfig& config, const WalkTrainer& train,
                                        const std::vector<std::string>& groups, bool sends);

/// Trains `config` with materialized attention and with flash attention (and flash under full
/// recomputation). Expects (gtest): losses within 1e-6 relative and the final state within 1e-5
/// (max |a − b| / max |b|: the sums of the online softmax run in another order; the shared
/// walk's flash runs agree with it to 3.7e-6 after 5 steps); every report row of the flash runs
/// equal to its closed form; "activations per block" below materialized's; the bytes of each of
/// `groups` equal (flash changes no message) without recomputation.
void expect_flash_matches_materialized(const GPTConfig& config, const WalkTrainer& train,
                                       const std::vector<std::string>& groups);

}  // namespace llmp
