// bazel run //stages/zero1:train  — ZeRO-1 on 4 ranks (mpiexec is started for you).
// Flags: bazel run //stages/zero1:train -- --help
#include <memory>

#include "common/train/train_main.h"
#include "stages/zero1/zero1.h"

int main(int argc, char** argv) {
  llmp::StageSpec spec;
  spec.name = "zero1";
  spec.summary = "ZeRO stage 1: optimizer state sharded over data-parallel ranks";
  spec.default_world_size = 4;
  spec.supports_precision = true;
  spec.make = [](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    return std::make_unique<llmp::Zero1Strategy>(ctx.model, ctx.grid.dp_group(), ctx.opt,
                                                 ctx.cfg.seed, ctx.mp);
  };
  return llmp::train_main(argc, argv, spec);
}
