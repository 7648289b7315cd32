// bazel run //stages/baseline:train  — the single-rank reference (no MPI job is started).
#include <memory>

#include "common/runtime/check.h"
#include "common/train/train_main.h"
#include "stages/baseline/baseline.h"

int main(int argc, char** argv) {
  llmp::StageSpec spec;
  spec.name = "baseline";
  spec.summary = "the single-rank reference trainer every stage is checked against";
  spec.default_world_size = 1;
  spec.supports_precision = true;
  spec.supports_clip_grad = true;  // --clip_grad (common/optim/grad_clip.h)
  spec.supports_moe = true;
  spec.supports_device = true;  // --device cuda: kernels/ops, GPT::with_device
  spec.validate = [](const llmp::TrainConfig& cfg) {
    if (cfg.world_size != 1)
      llmp::user_error("the baseline runs on one rank, not --world_size " +
                       std::to_string(cfg.world_size));
  };
  spec.make = [](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    return std::make_unique<llmp::BaselineStrategy>(ctx.model, ctx.opt, ctx.cfg.seed, ctx.mp);
  };
  return llmp::train_main(argc, argv, spec);
}
