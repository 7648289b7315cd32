// train_main: the training program every stage shares. A stage's main.cc only names itself,
// adds its own flags and says how to build its Strategy:
//
//   int main(int argc, char** argv) {
//     llmp::StageSpec spec;
//     spec.name = "zero2";
//     spec.summary = "ZeRO-2: sharded gradients and optimizer state";
//     spec.make = [](const llmp::StageContext& ctx) {
//       return std::make_unique<llmp::Zero2Strategy>(ctx.model, ctx.grid.dp_group(), ctx.opt,
//                                                    ctx.cfg.seed);
//     };
//     return llmp::train_main(argc, argv, spec);
//   }
//
// What it does: parse and validate flags and the output paths --save and --trace (one-line
// errors, exit 2, before any rank starts, and again inside the ranks);
// start `--world_size` ranks under mpiexec (the binary relaunches itself); cut the stage's
// dp × pp × tp grid out of the world (StageSpec::grid); load the corpus; build the model and the
// strategy; optionally --load a checkpoint; train with a progress bar (loss,
// tokens/s, ETA) and periodic validation loss; optionally --save; and print, per rank, the
// measured memory and bytes sent per step next to their closed forms (Strategy::report()), then
// let the stage add what the table cannot show (Strategy::finish()).
//
// Safety nets (exit codes: README.md, "Exit codes"; check.h, ExitCode): a NaN or infinite loss
// ends every rank at that step with "error: step N: loss is nan (diverged; ...)", exit 3, nothing
// saved; SIGINT / SIGTERM end every rank at the end of the step, exit 130 / 143
// (common/runtime/signals.h); an exception on any rank becomes "error: rank R: <what>", exit 1.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/comm/grid.h"
#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/runtime/flags.h"  // TrainConfig; CLI::App declared (options.h)
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// What a stage's factory gets to build its Strategy.
///
/// Groups: train_main cuts one ProcessGrid out of the world in the shape the stage asks for
/// (StageSpec::grid), and the factory hands its Strategy the group its technique talks over:
/// grid.dp_group() for data parallelism (naive DP, DDP, ZeRO), grid.pp_group() for a pipeline.
/// Each group counts its own CommStats, so a stage's report shows exactly the traffic on the
/// group it was given. Which world ranks land in which group (tp fastest, then pp, then dp:
/// world rank = (dp_rank·pp + pp_rank)·tp + tp_rank; grid.h works through 8 = 2 × 2 × 2):
///
///   world 4, data parallel (dp 4 × pp 1 × tp 1, the default grid):
///     rank:     0 1 2 3       dp group {0,1,2,3}
///     dp_rank:  0 1 2 3       pp groups {0} {1} {2} {3}   (one rank each: a no-op)
///     pp_rank:  0 0 0 0       tp groups {0} {1} {2} {3}
///   world 4, pipeline (dp 1 × pp 4 × tp 1, pipeline_stage_spec):
///     rank:     0 1 2 3       pp group {0,1,2,3}: stage s on rank s
///     pp_rank:  0 1 2 3       dp groups {0} {1} {2} {3},  tp groups {0} {1} {2} {3}
///   world 8 = dp 2 × pp 2 × tp 2 (grid.h):
///     tp groups {0,1} {2,3} {4,5} {6,7};  pp groups {0,2} {1,3} {4,6} {5,7};
///     dp groups {0,4} {1,5} {2,6} {3,7}.
struct StageContext {
  const GPT& model;
  ProcessGroup& world;     ///< all ranks of the run (the report table gathers over it)
  ProcessGrid& grid;       ///< dp × pp × tp groups cut from `world` in StageSpec::grid's shape
  const TrainConfig& cfg;  ///< parsed common flags
  AdamWConfig opt;         ///< from --lr, --weight_decay, --decay_all
  /// From --precision and the loss-scale flags (fp32 unless StageSpec::supports_precision).
  MixedPrecisionConfig mp;
};

/// The default grid: every rank a data-parallel replica, dp = cfg.world_size, pp = tp = 1.
GridShape data_parallel_grid(const TrainConfig& cfg);

struct StageSpec {
  std::string name;        ///< "zero2": used in --help and the report
  std::string summary;     ///< one line for --help
  int default_world_size = 4;
  int default_layers = 0;  ///< --layers default: 0 keeps the preset's L
  std::string default_model;  ///< --model default: empty keeps "mini" (the MoE stage: moe-mini)
  /// Whether the stage writes a Chrome trace for --trace (the pipeline stages do). Stages that
  /// don't reject the flag instead of ignoring it.
  bool supports_trace = false;
  /// Whether the stage trains in mixed precision (--precision bf16 / fp16, the loss-scale flags;
  /// common/tensor/precision.h). Stages that don't refuse --precision other than fp32 by name.
  bool supports_precision = false;
  /// Whether the stage trains a mixture-of-experts model (--model moe-*, --experts E;
  /// common/nn/moe.h). Stages that don't refuse such a model by name, before launch.
  bool supports_moe = false;
  /// Whether the stage trains with --device cuda (its states and the walk on the GPU: GPT::
  /// with_device, kernels/ops/kernel_ops.h). Stages that don't refuse it by name, before launch.
  /// A stage with both this and supports_precision trains bf16/fp16 on the device too (the
  /// master weights, loss scaler and rounding through kernels/ops).
  bool supports_device = false;
  /// Whether the stage clips gradients by the global norm (--clip_grad; common/optim/grad_clip.h:
  /// the stage knows which ranks own which part of the gradient; tests/clip_grad_test.sh checks
  /// each stage's norm). Every stage in stages/ does; one that doesn't (a new stage, until its
  /// ownership is written) refuses a non-zero --clip_grad by name, before launch, rather than
  /// train unclipped.
  bool supports_clip_grad = false;
  /// The dp × pp × tp grid for a parsed config; dp·pp·tp must equal cfg.world_size. Pipeline
  /// stages ask for pp = world_size (pipeline_stage_spec). The global batch must divide by dp
  /// (the data-parallel ranks split it; pipeline ranks all see the whole batch). A mismatch ends
  /// the run with one line naming the four numbers, exit 2: before launch, and again inside the
  /// ranks when they were started by mpiexec directly.
  std::function<GridShape(const TrainConfig&)> grid = data_parallel_grid;
  /// Adds stage-specific flags (e.g. --bucket_mb); may be empty.
  std::function<void(CLI::App&)> add_flags;
  /// Checks stage-specific flag values against the config (before ranks start); call
  /// user_error(...) with a one-line message naming the value on a problem. May be empty.
  std::function<void(const TrainConfig&)> validate;
  std::function<std::unique_ptr<Strategy>(const StageContext&)> make;
};

/// The model of a run: the --model preset, with L from --layers, T from --ctx and H from --heads
/// when > 0 (then named e.g. "mini-L8", "tiny-T2048-H4", so a checkpoint of one cannot be loaded
/// into the other). Throws std::invalid_argument when --heads does not divide C, and
/// std::invalid_argument for an unknown preset.
GPTConfig model_config(const TrainConfig& cfg);

/// The whole program. Returns the process exit code.
int train_main(int argc, char** argv, const StageSpec& spec);

}  // namespace llmp
