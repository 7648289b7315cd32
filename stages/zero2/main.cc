// bazel run //stages/zero2:train  — ZeRO-2 on 4 ranks (mpiexec is started for you).
// Flags: bazel run //stages/zero2:train -- --help
// ZeRO-R constant buffer (common/train/constant_buffer.h):
//   bazel run //stages/zero2:train -- --layers 8 --constant_buffer_mb 0.25 --steps 20
// ZeRO-Offload (common/train/offload_flag.h; on a GPU machine):
//   bazel run //stages/zero2:train -- --device cuda --offload optimizer
#include <memory>

#include "common/runtime/check.h"
#include "common/train/constant_buffer_flag.h"
#include "common/train/offload_flag.h"
#include "common/train/train_main.h"
#include "stages/zero2/zero2.h"

int main(int argc, char** argv) {
  llmp::ConstantBufferFlag constant_buffer;  // --constant_buffer_mb; lives as long as the run
  llmp::OffloadFlag offload;                 // --offload optimizer (ZeRO-Offload)
  llmp::StageSpec spec;
  spec.name = "zero2";
  spec.summary = "ZeRO stage 2: gradients and optimizer state sharded over data-parallel ranks";
  spec.default_world_size = 4;
  spec.supports_precision = true;
  spec.supports_clip_grad = true;  // --clip_grad (common/optim/grad_clip.h)
  spec.supports_device = true;  // --device cuda (without --constant_buffer_mb)
  spec.add_flags = [&](CLI::App& app) {
    constant_buffer.add(app);
    offload.add(app);
  };
  spec.validate = [&](const llmp::TrainConfig& cfg) {
    constant_buffer.validate(cfg);
    offload.validate(cfg);
    if (cfg.device != "cpu" && constant_buffer.mb() > 0)
      llmp::user_error("--constant_buffer_mb with --device " + cfg.device +
                       ": the constant buffer is host memory (run without it on a GPU)");
  };
  spec.make = [&](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    return std::make_unique<llmp::Zero2Strategy>(ctx.model, ctx.grid.dp_group(), ctx.opt,
                                                 ctx.cfg.seed, ctx.mp, constant_buffer.mb(),
                                                 offload.optimizer());
  };
  return llmp::train_main(argc, argv, spec);
}
