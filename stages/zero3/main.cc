// bazel run //stages/zero3:train  — ZeRO-3 on 4 ranks (mpiexec is started for you).
//   bazel run //stages/zero3:train -- --tile_factor 4 --steps 20   (memory-centric tiling)
// Flags: bazel run //stages/zero3:train -- --help
// ZeRO-R constant buffer (common/train/constant_buffer.h):
//   bazel run //stages/zero3:train -- --layers 8 --constant_buffer_mb 0.25 --steps 20
// ZeRO-Offload (common/train/offload.h; on a GPU machine):
//   bazel run //stages/zero3:train -- --device cuda --offload optimizer
#include <memory>
#include <string>

#include "common/runtime/check.h"
#include "common/runtime/options.h"
#include "common/train/constant_buffer_flag.h"
#include "common/train/offload_flag.h"
#include "common/train/train_main.h"
#include "stages/zero3/zero3.h"

namespace {
// "" when k tiles C, 3C and 4C into equal parts; else the one-line error naming k and C.
std::string tile_factor_error(int k, int C) {
  if (k < 1) return "--tile_factor must be >= 1, got " + std::to_string(k);
  if (C % k != 0)
    return "--tile_factor " + std::to_string(k) + " does not divide C=" + std::to_string(C) +
           " (the block linears are tiled along C, 3C and 4C)";
  return "";
}
}  // namespace

int main(int argc, char** argv) {
  llmp::ConstantBufferFlag constant_buffer;  // --constant_buffer_mb; lives as long as the run
  int tile_factor = 1;                       // bound to --tile_factor; lives as long as the run
  llmp::OffloadFlag offload;                 // --offload optimizer (ZeRO-Offload)
  llmp::StageSpec spec;
  spec.name = "zero3";
  spec.summary = "ZeRO stage 3 (FSDP): parameters, gradients and optimizer state sharded";
  spec.default_world_size = 4;
  spec.supports_precision = true;
  spec.supports_clip_grad = true;  // --clip_grad (common/optim/grad_clip.h)
  // --device cuda: the parameter, gradient and optimizer shards and every gathered unit on the
  // GPU; the per-unit all_gather and reduce_scatter as on the CPU. Not with
  // --constant_buffer_mb or --tile_factor > 1 (host buffers; the tiled layers run on the CPU).
  spec.supports_device = true;
  spec.add_flags = [&](CLI::App& app) {
    constant_buffer.add(app);
    offload.add(app);
    llmp::add_option(app, "--tile_factor", tile_factor,
                     "k: gather each block linear in k tiles, one at a time (ZeRO-Infinity's "
                     "memory-centric tiling); 1 gathers whole blocks");
  };
  spec.validate = [&](const llmp::TrainConfig& cfg) {
    constant_buffer.validate(cfg);
    offload.validate(cfg);
    const std::string err = tile_factor_error(tile_factor, llmp::model_config(cfg).d);
    if (!err.empty()) llmp::user_error(err);
    if (cfg.device != "cpu" && constant_buffer.mb() > 0)
      llmp::user_error("--constant_buffer_mb with --device " + cfg.device +
                       ": the constant buffer is host memory (run without it on a GPU)");
    if (cfg.device != "cpu" && tile_factor > 1)
      llmp::user_error("--tile_factor " + std::to_string(tile_factor) + " with --device " +
                       cfg.device + ": weight tiles are host memory (run with --tile_factor 1 "
                       "on a GPU)");
  };
  spec.make = [&](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    // Again inside the ranks (mpiexec may have started them directly, skipping validate).
    const std::string err = tile_factor_error(tile_factor, ctx.model.config().d);
    llmp::all_ranks_ok(err.empty(), err);
    return std::make_unique<llmp::Zero3Strategy>(ctx.model, ctx.grid.dp_group(), ctx.opt,
                                                 ctx.cfg.seed, ctx.mp, constant_buffer.mb(),
                                                 tile_factor, offload.optimizer());
  };
  return llmp::train_main(argc, argv, spec);
}
