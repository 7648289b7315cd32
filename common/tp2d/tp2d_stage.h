// tp2d_stage_spec: what the tp_2d and tp_2p5d stages' main.cc share: --depth (tp_2p5d only), the
// checks that run before any rank starts (and again inside the ranks), and the factory of a
// Tp2p5dStrategy over every rank of the world (StageSpec::grid is dp 1 × pp 1 × tp P, so
// ctx.grid.tp_group() is all P ranks; Grid2p5d splits it into rows, columns and depth).
//
//   int main(int argc, char** argv) {
//     llmp::Tp2dStageOptions o;  o.name = "tp_2d";  o.depth_flag = false;
//     return llmp::train_main(argc, argv, llmp::tp2d_stage_spec(o));
//   }
//
// Checked as one line "error: ..." and exit 2, before launch and inside the ranks:
//   - "tp_2d needs P = q×q ranks: world size 6 is not a square";
//   - "tp_2p5d needs P = q×q×d ranks: world size 6 is not q²·4 (--depth 4)";
//   - "--depth 0 must be at least 1";
//   - "--partition_activations: tp_2d's checkpoints are already split over its grid ..." (the
//     walk recomputes, --recompute selective or full, but has no ZeRO-R Pa; nor Pa+cpu:
//     --cpu_checkpointing is refused alike);
//   - "grid side q=2 does not divide H=3, C=33, 4C=132 and V=256" (Layout2p5d);
//   - "global batch 6 is not divisible by d·q = 4 (rank rows hold whole sequences)".
//
// Glossary: P ranks, q grid side, d depth, H heads, C channels, V vocab.
#pragma once

#include <string>

#include "common/train/train_main.h"

namespace llmp {

struct Tp2dStageOptions {
  std::string name;          ///< "tp_2d" or "tp_2p5d"
  std::string summary;       ///< one line for --help
  bool depth_flag = false;   ///< tp_2p5d: --depth d; tp_2d: d = 1
  int default_depth = 1;
  int default_world_size = 4;
  /// --device cuda (fp32): the walk, its state and every group's buffers on the device.
  bool supports_device = false;
};

/// The first problem with cfg on P = cfg.world_size ranks of depth d, as one line, or "" when
/// fine. Pure: used before launch, inside the ranks and by the tests.
std::string tp2d_config_error(const TrainConfig& cfg, const std::string& stage, int depth);

/// A StageSpec whose flags, validation and factory follow `o`.
StageSpec tp2d_stage_spec(const Tp2dStageOptions& o);

}  // namespace llmp
