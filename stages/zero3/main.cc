// bazel run //stages/zero3:train  — ZeRO-3 on 4 ranks (mpiexec is started for you).
// Flags: bazel run //stages/zero3:train -- --help
#include <memory>

#include "common/train/train_main.h"
#include "stages/zero3/zero3.h"

int main(int argc, char** argv) {
  llmp::StageSpec spec;
  spec.name = "zero3";
  spec.summary = "ZeRO stage 3 (FSDP): parameters, gradients and optimizer state sharded";
  spec.default_world_size = 4;
  spec.supports_precision = true;
  spec.make = [](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    return std::make_unique<llmp::Zero3Strategy>(ctx.model, ctx.grid.dp_group(), ctx.opt,
                                                 ctx.cfg.seed, ctx.mp);
  };
  return llmp::train_main(argc, argv, spec);
}
