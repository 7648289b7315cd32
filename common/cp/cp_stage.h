// cp_stage_spec: what the long-sequence stages' main.cc share (stages/ring_self_attention,
// stages/ring_attention, stages/ulysses): the grid, the checks that run before any rank starts
// (and again inside the ranks), and the factory of a ContextParallelStrategy with the stage's
// AttentionCore.
//
//   int main(int argc, char** argv) {
//     llmp::CpStageOptions o;
//     o.name = "ulysses";
//     o.make_core = [](llmp::ProcessGroup& g) { return std::make_unique<UlyssesAttention>(g); };
//     o.split_error = ulysses_split_error;
//     return llmp::train_main(argc, argv, llmp::cp_stage_spec(o));
//   }
//
// The grid is dp 1 × pp 1 × tp p (context_parallel_grid): the p ranks of the world are one
// context-parallel group, every rank reads the whole batch. Refused with one line and exit 2,
// before launch and inside the ranks: a sequence length (--ctx, or the preset's) that the core
// cannot split over p ranks, or H not divisible by p for Ulysses (the core's split_error);
// --recompute selective (a core keeps what its method keeps; --recompute full and
// --recompute_every k run the blocks' forwards again, the core's communication with them, and
// with --device cuda --cpu_checkpointing the kept inputs wait on the host: cp_strategy.h) and
// --partition_activations.
// Every stage here takes --device (StageSpec::supports_device): the strategy, the walk and the
// three cores run on the model's device; and --precision bf16 / fp16
// (StageSpec::supports_precision; cp_strategy.h says what is 16-bit).
//
// Glossary: p ranks of the context-parallel group, T sequence length, H heads.
#pragma once

#include <functional>
#include <string>

#include "common/cp/cp_strategy.h"
#include "common/train/train_main.h"

namespace llmp {

struct CpStageOptions {
  std::string name;     ///< "ulysses"
  std::string summary;  ///< one line for --help
  int default_world_size = 4;
  /// The stage's core over the given group (called inside the ranks, after the checks).
  CoreFactory make_core;
  /// The first reason the core cannot split sequences of T positions with H heads over p ranks,
  /// as one line naming the values, or "".
  std::function<std::string(int T, int H, int p)> split_error;
  /// Stage-specific flags (e.g. ring_attention's --split); may be empty.
  std::function<void(CLI::App&)> add_flags;
};

/// The first problem with cfg's model and the stage's split on cfg.world_size ranks, as one
/// line, or "" when fine. Pure: used before launch, inside the ranks and by the tests.
std::string cp_config_error(const TrainConfig& cfg, const CpStageOptions& o);

/// A StageSpec whose grid, validation and factory follow `o`.
StageSpec cp_stage_spec(const CpStageOptions& o);

}  // namespace llmp
