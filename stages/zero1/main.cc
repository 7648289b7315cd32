// bazel run //stages/zero1:train  — ZeRO-1 on 4 ranks (mpiexec is started for you).
// Flags: bazel run //stages/zero1:train -- --help
// ZeRO-R constant buffer (common/train/constant_buffer.h):
//   bazel run //stages/zero1:train -- --layers 8 --constant_buffer_mb 0.25 --steps 20
#include <memory>

#include "common/runtime/check.h"
#include "common/train/constant_buffer_flag.h"
#include "common/train/train_main.h"
#include "stages/zero1/zero1.h"

int main(int argc, char** argv) {
  llmp::ConstantBufferFlag constant_buffer;  // --constant_buffer_mb; lives as long as the run
  llmp::StageSpec spec;
  spec.name = "zero1";
  spec.summary = "ZeRO stage 1: optimizer state sharded over data-parallel ranks";
  spec.default_world_size = 4;
  spec.supports_precision = true;
  spec.supports_clip_grad = true;  // --clip_grad (common/optim/grad_clip.h)
  // --device cuda: parameters, gradients, the gradient shard and the sharded m and v on the GPU;
  // the reduce-scatter and the in-place all_gather as on the CPU. Not with --constant_buffer_mb
  // (a host buffer).
  spec.supports_device = true;
  spec.add_flags = [&constant_buffer](CLI::App& app) { constant_buffer.add(app); };
  spec.validate = [&constant_buffer](const llmp::TrainConfig& cfg) {
    constant_buffer.validate(cfg);
    if (cfg.device != "cpu" && constant_buffer.mb() > 0)
      llmp::user_error("--constant_buffer_mb with --device " + cfg.device +
                       ": the constant buffer is host memory (run without it on a GPU)");
  };
  spec.make = [&constant_buffer](
                  const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    return std::make_unique<llmp::Zero1Strategy>(ctx.model, ctx.grid.dp_group(), ctx.opt,
                                                 ctx.cfg.seed, ctx.mp, constant_buffer.mb());
  };
  return llmp::train_main(argc, argv, spec);
}
