// cp_stage_spec (see cp_stage.h).
#include "common/cp/cp_stage.h"

#include <memory>
#include <stdexcept>

#include "common/runtime/check.h"

namespace llmp {

std::string cp_config_error(const TrainConfig& cfg, const CpStageOptions& o) {
  if (cfg.recompute == "selective")
    return "--recompute selective: " + o.name +
           " recomputes whole blocks only (--recompute full): selective recomputation drops the "
           "whole-sequence attention's probabilities, and a core keeps what its method keeps";
  if (cfg.partition_activations)
    return "--partition_activations: " + o.name +
           " splits the sequence, not the channels: each rank's checkpoints are already its T/p "
           "rows (Pa partitions tensor parallelism's replicated checkpoints)";
  try {
    const GPTConfig mc = model_config(cfg);
    if (o.split_error) {
      const std::string err = o.split_error(mc.ctx, mc.heads, cfg.world_size);
      if (!err.empty()) return err;
    }
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (cfg.attention != "materialized")
    return "--attention " + cfg.attention + ": " + o.name +
           " attends through its own core (common/nn/attention_core.h); ring attention is the "
           "blockwise online softmax across ranks";
  return "";
}

StageSpec cp_stage_spec(const CpStageOptions& o) {
  auto opts = std::make_shared<CpStageOptions>(o);
  StageSpec spec;
  spec.name = o.name;
  spec.summary = o.summary;
  spec.default_world_size = o.default_world_size;
  spec.grid = [](const TrainConfig& cfg) { return context_parallel_grid(cfg.world_size); };
  spec.add_flags = o.add_flags;
  // The strategy places its states and buffers on the model's device, and every core runs there
  // (AttentionCore::supports_device()).
  spec.supports_device = true;
  spec.supports_clip_grad = true;  // --clip_grad: each rank holds the whole summed gradient
  // --precision bf16 / fp16: 16-bit replicas and activations, the fp32 master copy (cp_strategy.h).
  spec.supports_precision = true;
  spec.validate = [opts](const TrainConfig& cfg) {
    const std::string err = cp_config_error(cfg, *opts);
    if (!err.empty()) user_error(err);
  };
  spec.make = [opts](const StageContext& ctx) -> std::unique_ptr<Strategy> {
    // Inside the ranks too (when started by mpiexec directly, the launcher's checks are skipped).
    const std::string err = cp_config_error(ctx.cfg, *opts);
    all_ranks_ok(err.empty(), err);
    return std::make_unique<ContextParallelStrategy>(ctx.model, ctx.grid.tp_group(),
                                                     opts->make_core, ctx.opt, ctx.cfg.seed,
                                                     ctx.mp);
  };
  return spec;
}

}  // namespace llmp
