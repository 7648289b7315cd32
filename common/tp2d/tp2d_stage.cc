// tp2d_stage_spec (see tp2d_stage.h).
#include "common/tp2d/tp2d_stage.h"

#include <memory>
#include <stdexcept>

#include "common/runtime/check.h"
#include "common/runtime/options.h"
#include "common/tp2d/grid_2p5d.h"
#include "common/tp2d/layout_2p5d.h"
#include "common/tp2d/tp2d_strategy.h"

namespace llmp {

std::string tp2d_config_error(const TrainConfig& cfg, const std::string& stage, int depth) {
  const int P = cfg.world_size;
  // --recompute none, selective and full (with --recompute_every) are the walk's own
  // (gpt_2p5d.h); ZeRO-R's partitioned and host checkpoints are not.
  if (cfg.partition_activations)
    return "--partition_activations: " + stage +
           "'s checkpoints are already split over its grid (each rank keeps N·C/q of a block "
           "input); ZeRO-R's Pa partitions a checkpoint tensor parallelism replicates";
  if (cfg.cpu_checkpointing)
    return "--cpu_checkpointing: " + stage +
           " keeps its checkpoints on the device (its walk, common/tp2d/gpt_2p5d.h, has no "
           "host copies)";
  if (depth < 1) return "--depth " + std::to_string(depth) + " must be at least 1";
  if (depth == 1 && exact_sqrt(P) == 0)
    return stage + " needs P = q×q ranks: world size " + std::to_string(P) + " is not a square";
  if (P % depth != 0 || exact_sqrt(P / depth) == 0)
    return stage + " needs P = q×q×d ranks: world size " + std::to_string(P) + " is not q²·" +
           std::to_string(depth) + " (--depth " + std::to_string(depth) + ")";
  const int q = exact_sqrt(P / depth);
  try {
    const std::string err = tp2d_model_error(model_config(cfg), q);
    if (!err.empty()) return err;
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (cfg.global_batch % (depth * q) != 0)
    return "global batch " + std::to_string(cfg.global_batch) + " is not divisible by d·q = " +
           std::to_string(depth * q) + " (rank rows hold whole sequences)";
  return "";
}

StageSpec tp2d_stage_spec(const Tp2dStageOptions& o) {
  auto opts = std::make_shared<Tp2dStageOptions>(o);
  auto depth = std::make_shared<int>(o.default_depth);  // --depth, written by the parser
  StageSpec spec;
  spec.name = o.name;
  spec.summary = o.summary;
  spec.default_world_size = o.default_world_size;
  spec.supports_device = o.supports_device;
  // --clip_grad: the norm over all P ranks, each tensor block counted on one of them.
  spec.supports_clip_grad = true;
  // dp 1 × pp 1 × tp P: the tp group is every rank; the strategy cuts it into its grid.
  spec.grid = [](const TrainConfig& cfg) { return GridShape{1, 1, cfg.world_size}; };
  if (o.depth_flag)
    spec.add_flags = [depth](CLI::App& app) {
      add_option(app, "--depth", *depth, "d: grid layers (P = d·q²); the batch is split over them");
    };
  spec.validate = [opts, depth](const TrainConfig& cfg) {
    const std::string err = tp2d_config_error(cfg, opts->name, *depth);
    if (!err.empty()) user_error(err);
  };
  spec.make = [opts, depth](const StageContext& ctx) -> std::unique_ptr<Strategy> {
    // Inside the ranks too (when started by mpiexec directly, the launcher's checks are skipped).
    const std::string err = tp2d_config_error(ctx.cfg, opts->name, *depth);
    all_ranks_ok(err.empty(), err);
    return std::make_unique<Tp2p5dStrategy>(ctx.model.config(), ctx.grid.tp_group(), *depth,
                                            ctx.opt, ctx.cfg.seed, ctx.model.device());
  };
  return spec;
}

}  // namespace llmp
