// tp3d_stage_spec: the tp_3d stage's StageSpec (stages/tp_3d/main.cc). Only the common flags:
// q = ∛P from --world_size. The grid is dp 1 × pp 1 × tp P (as common/tp/tp_stage.cc), so
// ctx.grid.tp_group() is all P ranks, which Cube splits into its five groups (cube.h).
// Checked as one line "error: ..." and exit 2, before launch and inside the ranks:
//   - "tp_3d needs P = q×q×q ranks: world size 6 is not a cube";
//   - "3D tensor parallelism with q=2 needs q | H, q² | C and q² | V: H=2 C=36 V=256";
//   - "global batch 6 is not divisible by q² = 4 (3D tensor parallelism splits it into q²
//     sequence sub-blocks)";
//   - "--partition_activations: tp_3d's checkpoints are already split over its cube ..." (the
//     walk recomputes, --recompute selective or full, but has no ZeRO-R Pa; --cpu_checkpointing
//     is refused alike).
// Glossary: P ranks, q cube side, H heads, C channels, V vocab, B global batch.
#pragma once

#include <string>

#include "common/train/train_main.h"

namespace llmp {

/// The first problem with cfg on its --world_size ranks as one line, or "" when fine. Pure.
std::string tp3d_config_error(const TrainConfig& cfg);

/// bazel run //stages/tp_3d:train: default 8 ranks (q = 2), mini.
StageSpec tp3d_stage_spec();

}  // namespace llmp
