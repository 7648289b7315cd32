// bazel run //stages/naive_dp:train  — naive data parallelism on 4 ranks (mpiexec is started
// for you). Flags: bazel run //stages/naive_dp:train -- --help
#include <memory>

#include "common/train/train_main.h"
#include "stages/naive_dp/naive_dp.h"

int main(int argc, char** argv) {
  llmp::StageSpec spec;
  spec.name = "naive_dp";
  spec.summary = "naive data parallelism: full replicas, one all_reduce of all gradients after "
                 "backward";
  spec.default_world_size = 4;
  spec.supports_precision = true;  // --precision fp32|bf16|fp16
  spec.supports_clip_grad = true;  // --clip_grad (common/optim/grad_clip.h)
  spec.supports_device = true;     // --device cuda: gradients all-reduced through the group
  spec.make = [](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    return std::make_unique<llmp::NaiveDPStrategy>(ctx.model, ctx.grid.dp_group(), ctx.opt,
                                                   ctx.cfg.seed, ctx.mp);
  };
  return llmp::train_main(argc, argv, spec);
}
