// tp_stage_spec (see tp_stage.h).
#include "common/tp/tp_stage.h"

#include <memory>
#include <stdexcept>

#include "common/nn/gpt.h"
#include "common/runtime/check.h"
#include "common/runtime/options.h"
#include "common/tp/tp_strategy.h"

namespace llmp {

std::string tp_config_error(const TrainConfig& cfg, int tp, bool sequence_parallel) {
  const int t = tp > 0 ? tp : cfg.world_size;
  try {
    const GPTConfig mc = model_config(cfg);
    GPTLayout(mc, t, 0);  // t must divide H, 4C and V
    if (sequence_parallel && mc.ctx % t != 0)
      return "sequence length T=" + std::to_string(mc.ctx) + " is not divisible by tp " +
             std::to_string(t) + " (sequence parallelism splits every sequence over the ranks)";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

StageSpec tp_stage_spec(const TpStageOptions& o) {
  auto opts = std::make_shared<TpStageOptions>(o);
  auto tp = std::make_shared<int>(0);  // --tp, written by the parser
  StageSpec spec;
  spec.name = o.name;
  spec.summary = o.summary;
  spec.default_world_size = o.default_world_size;
  spec.supports_device = o.supports_device;
  // --clip_grad: the norm over tp of the split slices, the replicated tensors from tp rank 0.
  spec.supports_clip_grad = true;
  // --precision bf16 / fp16: the slices in 16 bits, f's and g's all_reduces at 2 bytes an element.
  spec.supports_precision = true;
  // dp 1 × pp 1 × tp t: every rank reads the whole batch; train_main checks t == world size.
  spec.grid = [tp](const TrainConfig& cfg) {
    return GridShape{1, 1, *tp > 0 ? *tp : cfg.world_size};
  };
  spec.add_flags = [tp](CLI::App& app) {
    add_option(app, "--tp", *tp, "t: tensor-parallel size (0 = the world size; must equal it)");
  };
  spec.validate = [opts, tp](const TrainConfig& cfg) {
    const std::string err = tp_config_error(cfg, *tp, opts->sequence_parallel);
    if (!err.empty()) user_error(err);
  };
  spec.make = [opts, tp](const StageContext& ctx) -> std::unique_ptr<Strategy> {
    // Inside the ranks too (when started by mpiexec directly, the launcher's checks are skipped).
    const std::string err = tp_config_error(ctx.cfg, *tp, opts->sequence_parallel);
    all_ranks_ok(err.empty(), err);
    return std::make_unique<TensorParallelStrategy>(ctx.model.config(), ctx.grid.tp_group(),
                                                    ctx.opt, ctx.cfg.seed,
                                                    opts->sequence_parallel, ctx.model.device(),
                                                    ctx.mp);
  };
  return spec;
}

}  // namespace llmp
