// bazel run //stages/ddp:train  — DDP on 4 ranks (mpiexec is started for you).
//   bazel run //stages/ddp:train -- --bucket_mb 0.25 --grad_accum 2
//   bazel run //stages/ddp:train -- --layers 8 --constant_buffer_mb 0.25 --steps 20  (ZeRO-R CB)
// Flags: bazel run //stages/ddp:train -- --help
#include <cstdio>
#include <memory>
#include <string>

#include "common/runtime/check.h"
#include "common/runtime/options.h"
#include "common/train/constant_buffer_flag.h"
#include "common/train/train_main.h"
#include "stages/ddp/ddp.h"

namespace {
std::string num(double v) {  // 0.5, not 0.500000
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

int main(int argc, char** argv) {
  llmp::DDPOptions options;  // bound to the flags below; lives as long as the run
  llmp::ConstantBufferFlag constant_buffer;
  llmp::StageSpec spec;
  spec.name = "ddp";
  spec.summary = "PyTorch-style DDP: bucketed all_reduce overlapped with backward, "
                 "gradient accumulation without communication (no_sync)";
  spec.default_world_size = 4;
  spec.supports_precision = true;  // --precision fp32|bf16|fp16
  spec.supports_clip_grad = true;  // --clip_grad (common/optim/grad_clip.h)
  // --device cuda: parameters, gradients (the buckets are views of them), m and v on the GPU;
  // each bucket's all_reduce_async as on the CPU. Not with --constant_buffer_mb (host).
  spec.supports_device = true;
  spec.add_flags = [&options, &constant_buffer](CLI::App& app) {
    llmp::add_option(app, "--bucket_mb", options.bucket_mb,
                     "gradient bucket capacity in MiB (PyTorch's bucket_cap_mb)");
    llmp::add_option(app, "--grad_accum", options.grad_accum,
                     "micro-steps per optimizer step; only the last one communicates");
    constant_buffer.add(app);
  };
  spec.validate = [&options, &constant_buffer](const llmp::TrainConfig& cfg) {
    constant_buffer.validate(cfg);
    if (cfg.device != "cpu" && constant_buffer.mb() > 0)
      llmp::user_error("--constant_buffer_mb with --device " + cfg.device +
                       ": the constant buffer is host memory (run without it on a GPU)");
    if (!(options.bucket_mb > 0))
      llmp::user_error("--bucket_mb must be > 0, got " + num(options.bucket_mb));
    if (options.grad_accum < 1)
      llmp::user_error("--grad_accum must be >= 1, got " + std::to_string(options.grad_accum));
    if (cfg.global_batch % (cfg.world_size * options.grad_accum) != 0)
      llmp::user_error("global batch " + std::to_string(cfg.global_batch) +
                       " is not divisible by data-parallel size " +
                       std::to_string(cfg.world_size) + " × grad_accum " +
                       std::to_string(options.grad_accum));
  };
  spec.make = [&options, &constant_buffer](
                  const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    options.constant_buffer_mb = constant_buffer.mb();
    return std::make_unique<llmp::DDPStrategy>(ctx.model, ctx.grid.dp_group(), ctx.opt,
                                               ctx.cfg.seed, options, ctx.mp);
  };
  return llmp::train_main(argc, argv, spec);
}
