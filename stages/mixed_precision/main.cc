// bazel run //stages/mixed_precision:train  — the same model trained in fp32, bf16, fp16 with
// dynamic loss scaling and fp16 without scaling, side by side (side_by_side.h). Without
// --summary_json this process is the driver: it runs itself four times and prints the table;
// with it, it is one ordinary one-rank run (train_main) that writes what it measured there.
#include <cstring>
#include <memory>
#include <string>

#include "common/runtime/check.h"
#include "common/runtime/options.h"
#include "common/train/train_main.h"
#include "stages/mixed_precision/precision_strategy.h"
#include "stages/mixed_precision/side_by_side.h"

namespace {
bool wants_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) return true;
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  if (!wants_help(argc, argv) && !llmp::is_single_run(argc, argv))
    return llmp::run_side_by_side(argc, argv);

  static std::string summary_json;
  llmp::StageSpec spec;
  spec.name = "mixed_precision";
  spec.summary =
      "fp32, bf16, fp16 with dynamic loss scaling and fp16 with --loss_scale 1, side by side "
      "(one rank each; without --summary_json the binary runs all four and prints the table)";
  spec.default_world_size = 1;
  spec.supports_precision = true;
  spec.supports_clip_grad = true;  // --clip_grad (common/optim/grad_clip.h)
  // --device cuda: the single-rank trainer on the GPU in each precision, the rounding counts
  // taken there (KernelOps::count_rounding), so the table's underflow column is the CPU's.
  spec.supports_device = true;
  spec.add_flags = [](CLI::App& app) {
    llmp::add_option_no_default(app, "--summary_json", summary_json,
                                "one run: write what it measured here (JSON); the driver sets it");
  };
  spec.validate = [](const llmp::TrainConfig& cfg) {
    if (cfg.world_size != 1)
      llmp::user_error("mixed_precision runs on one rank, not --world_size " +
                       std::to_string(cfg.world_size));
    if (cfg.steps < 1)
      llmp::user_error("--steps " + std::to_string(cfg.steps) +
                       ": mixed_precision compares trained runs (at least 1 step)");
    if (!cfg.save.empty() || !cfg.load.empty())
      llmp::user_error(std::string(cfg.save.empty() ? "--load " + cfg.load : "--save " + cfg.save) +
                       ": mixed_precision compares four fresh runs; save or resume one "
                       "precision with //stages/baseline:train --precision");
  };
  spec.make = [](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    return std::make_unique<llmp::PrecisionStrategy>(ctx.model, ctx.opt, ctx.cfg.seed, ctx.mp,
                                                     summary_json, ctx.cfg.loss_scale);
  };
  return llmp::train_main(argc, argv, spec);
}
