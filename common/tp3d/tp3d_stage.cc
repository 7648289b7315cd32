// tp3d_stage_spec (see tp3d_stage.h).
#include "common/tp3d/tp3d_stage.h"

#include <memory>
#include <stdexcept>

#include "common/runtime/check.h"
#include "common/tp3d/cube.h"
#include "common/tp3d/layout_3d.h"
#include "common/tp3d/tp3d_strategy.h"

namespace llmp {

std::string tp3d_config_error(const TrainConfig& cfg) {
  const int P = cfg.world_size, q = cube_side(P);
  if (q == 0)
    return "tp_3d needs P = q×q×q ranks: world size " + std::to_string(P) + " is not a cube";
  try {
    const std::string err = layout3d_error(model_config(cfg), q);
    if (!err.empty()) return err;
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  // --recompute selective and full are the walk's own (gpt_3d.h); ZeRO-R's Pa and Pa+cpu are not.
  if (cfg.partition_activations)
    return "--partition_activations: tp_3d's checkpoints are already split over its cube (each "
           "rank keeps B·T·C/q³ of a block input); ZeRO-R's Pa partitions a checkpoint tensor "
           "parallelism replicates";
  if (cfg.cpu_checkpointing)
    return "--cpu_checkpointing: tp_3d keeps its checkpoints on the device (its walk, "
           "common/tp3d/gpt_3d.h, has no host copies)";
  if (cfg.global_batch % (q * q) != 0)
    return "global batch " + std::to_string(cfg.global_batch) + " is not divisible by q² = " +
           std::to_string(q * q) + " (3D tensor parallelism splits it into q² sequence sub-blocks)";
  return "";
}

StageSpec tp3d_stage_spec() {
  StageSpec spec;
  spec.name = "tp_3d";
  spec.summary = "3D tensor parallelism (Bian et al. 2021): activations and weights split over a "
                 "q×q×q cube of ranks";
  spec.default_world_size = 8;
  spec.supports_device = true;  // --device cuda (fp32): the walk, its buffers and AdamW on it
  spec.supports_clip_grad = true;  // the norm over the cube, a replicated vector counted once
  spec.grid = [](const TrainConfig& cfg) { return GridShape{1, 1, cfg.world_size}; };
  spec.validate = [](const TrainConfig& cfg) {
    const std::string err = tp3d_config_error(cfg);
    if (!err.empty()) user_error(err);
  };
  spec.make = [](const StageContext& ctx) -> std::unique_ptr<Strategy> {
    // Inside the ranks too (started by mpiexec directly, the launcher's checks are skipped).
    const std::string err = tp3d_config_error(ctx.cfg);
    all_ranks_ok(err.empty(), err);
    return std::make_unique<Tp3dStrategy>(ctx.model.config(), ctx.grid.tp_group(), ctx.opt,
                                          ctx.cfg.seed, ctx.model.device());
  };
  return spec;
}

}  // namespace llmp
