// pipeline_stage_spec: what the pipeline stages' main.cc share — the flags --micro_batches
// and --chunks, the checks that run before any rank starts, and the factory of a
// PipelineStrategy for a named schedule (schedule.h's make_schedule).
//
//   int main(int argc, char** argv) {
//     llmp::PipelineStageOptions o;
//     o.name = "gpipe";  o.schedule = "gpipe";  o.micro_batches = 8;
//     return llmp::train_main(argc, argv, llmp::pipeline_stage_spec(o));
//   }
//
// The pipeline size is the world size: p = --world_size, every rank one stage (the stage's grid
// is dp 1 × pp p × tp 1; its strategy runs on the grid's pp group). Checked before launch, each
// as one line "error: ..." and exit 2:
//   - the layers of --model divide into p·v virtual stages ("layers 4 not divisible by p·v = 8
//     (p=4, v=2)");
//   - --micro_batches m ≥ 1 divides --global_batch ("global batch 16 is not divisible by 3
//     micro-batches (--micro_batches)");
//   - the schedule accepts (p, m, v), e.g. interleaved 1F1B needs m % p == 0 (make_schedule's
//     message).
//
// Glossary: p pipeline stages, m micro-batches, v chunks per rank, B global batch.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/pipeline/logical_clock.h"
#include "common/train/train_main.h"

namespace llmp {

struct PipelineStageOptions {
  std::string name;       ///< the stage: "gpipe", ...
  std::string summary;    ///< one line for --help
  std::string schedule;   ///< make_schedule's name: "naive", "gpipe", "1f1b", ...
  int default_world_size = 4;
  int default_layers = 0;  ///< 0: the preset's L (interleaved needs L divisible by p·v)
  int micro_batches = 8;  ///< default m
  int chunks = 1;         ///< default v
  bool micro_batches_flag = true;  ///< offer --micro_batches (naive_pp fixes m = 1)
  bool chunks_flag = false;        ///< offer --chunks (interleaved only)
  /// The paper's bubble fraction for (p, m, v), printed by finish() next to the executed one
  /// (PipelineStrategy::set_bubble_formula); a negative value when it does not apply. Empty:
  /// none printed.
  std::function<double(int p, int m, int v)> bubble_formula;
  std::string bubble_formula_text;  ///< e.g. "(p-1)/(m+p-1)"
  /// The executor's logical clock (logical_clock.h): F = 1, B = 2 unless the stage's paper
  /// states its bubble for other costs (Chimera: F = B = 1).
  LogicalCosts clock_costs;
  /// A further check of (p, m) a stage's schedule needs, as one line ("" when fine): e.g.
  /// PipeDream-2BW's m >= p. Empty: none.
  std::function<std::string(int p, int m)> extra_check;
  /// The strategy, when the stage is not a PipelineStrategy over make_schedule(schedule, ...)
  /// (PipeDream-2BW's flush-free stream). Empty: that PipelineStrategy.
  std::function<std::unique_ptr<Strategy>(const StageContext& ctx, int m)> make_strategy;
};

/// The first problem with running `schedule` on cfg.world_size ranks with m micro-batches and
/// v chunks, as one line, or "" when fine. Pure: used before launch and by the tests.
std::string pipeline_config_error(const TrainConfig& cfg, const std::string& schedule, int m,
                                  int v);

/// A StageSpec whose flags, validation and factory follow `o`.
StageSpec pipeline_stage_spec(const PipelineStageOptions& o);

}  // namespace llmp
