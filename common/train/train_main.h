// train_main: the training program every stage shares. A stage's main.cc only names itself,
// adds its own flags and says how to build its Strategy:
//
//   int main(int argc, char** argv) {
//     llmp::StageSpec spec;
//     spec.name = "zero2";
//     spec.summary = "ZeRO-2: sharded gradients and optimizer state";
//     spec.make = [](const llmp::StageContext& ctx) {
//       return std::make_unique<llmp::Zero2Strategy>(ctx.model, ctx.world, ctx.opt, ctx.cfg.seed);
//     };
//     return llmp::train_main(argc, argv, spec);
//   }
//
// What it does: parse and validate flags (one-line errors, exit 2, before any rank starts);
// start `--world_size` ranks under mpiexec (the binary relaunches itself); load the corpus; build
// the model and the strategy; optionally --load a checkpoint; train with a progress bar (loss,
// tokens/s, ETA) and periodic validation loss; optionally --save; and print, per rank, the
// measured memory and bytes sent per step next to their closed forms (Strategy::report()), then
// let the stage add what the table cannot show (Strategy::finish()).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/runtime/flags.h"
#include "common/train/strategy.h"

namespace CLI {
class App;
}

namespace llmp {

/// What a stage's factory gets to build its Strategy.
struct StageContext {
  const GPT& model;
  ProcessGroup& world;     ///< all ranks of the run
  const TrainConfig& cfg;  ///< parsed common flags
  AdamWConfig opt;         ///< from --lr, --weight_decay
};

struct StageSpec {
  std::string name;        ///< "zero2": used in --help and the report
  std::string summary;     ///< one line for --help
  int default_world_size = 4;
  int default_layers = 0;  ///< --layers default: 0 keeps the preset's L
  /// Whether the stage writes a Chrome trace for --trace (the pipeline stages do). Stages that
  /// don't reject the flag instead of ignoring it.
  bool supports_trace = false;
  /// Whether the world's ranks split the global batch between them (data parallelism: B must be
  /// divisible by the world size). Pipeline ranks all see the whole batch: false.
  bool splits_batch_over_ranks = true;
  /// Adds stage-specific flags (e.g. --bucket_mb); may be empty.
  std::function<void(CLI::App&)> add_flags;
  /// Checks stage-specific flag values against the config (before ranks start); call
  /// user_error(...) with a one-line message naming the value on a problem. May be empty.
  std::function<void(const TrainConfig&)> validate;
  std::function<std::unique_ptr<Strategy>(const StageContext&)> make;
};

/// The model of a run: the --model preset, with L from --layers when > 0 (then named e.g.
/// "mini-L8", so a checkpoint of one cannot be loaded into the other). Throws
/// std::invalid_argument for an unknown preset.
GPTConfig model_config(const TrainConfig& cfg);

/// The whole program. Returns the process exit code.
int train_main(int argc, char** argv, const StageSpec& spec);

}  // namespace llmp
