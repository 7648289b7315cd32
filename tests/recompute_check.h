// Activation recomputation checked against none for a stage whose walk is its own (the 2D, 2.5D
// and 3D tensor-parallel stages: common/tp2d/gpt_2p5d.h, common/tp3d/gpt_3d.h): the same bits,
// fewer bytes kept, and what the recomputation made and sent again as its closed forms.
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
struct RecomputeRun {
  std::vector<double> losses;
  std::vector<float> state;
  std::vector<ReportRow> rows;
  RecomputeMeter meter;
};

/// Trains the stage from the same seed on the same batches under config's recompute policy.
/// It must set RecomputeMeter::instance() = RecomputeMeter() before each step (as train_main
/// resets it; the walks checked here do not write its forward_* fields).
using RecomputeTrainer = std::function<RecomputeRun(const GPTConfig&)>;

/// Trains `config` (recompute none) and then selective, full, full every 2 and full every 3
/// (config.layers ≥ 4 cuts different segments). Expects (gtest) for each: every loss and the
/// state bit for bit the run without recomputation's; config.layers blocks (full) or softmax
/// probabilities (selective) made again in the last step; every report row equal to its closed
/// form, the recomputed FLOPs row present and > 0; "activations per block" below none's. Each of
/// `groups` (report rows of bytes sent): under full more than none's when `sends` (q > 1), else
/// and under selective exactly none's.
void expect_recomputation_bit_identical(const GPTConfig& config, const RecomputeTrainer& train,
                                        const std::vector<std::string>& groups, bool sends);

}  // namespace llmp
