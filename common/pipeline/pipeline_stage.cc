// pipeline_stage_spec (see pipeline_stage.h).
#include "common/pipeline/pipeline_stage.h"

#include <memory>
#include <stdexcept>

#include "common/pipeline/gpt_partition.h"
#include "common/pipeline/pipeline_strategy.h"
#include "common/pipeline/schedule.h"
#include "common/runtime/check.h"
#include "common/runtime/options.h"

namespace llmp {

std::string pipeline_config_error(const TrainConfig& cfg, const std::string& schedule, int m,
                                  int v) {
  const int p = cfg.world_size;
  if (m < 1) return "--micro_batches " + std::to_string(m) + " must be at least 1";
  if (v < 1) return "--chunks " + std::to_string(v) + " must be at least 1";
  if (cfg.global_batch % m != 0)
    return "global batch " + std::to_string(cfg.global_batch) + " is not divisible by " +
           std::to_string(m) + " micro-batches (--micro_batches)";
  try {
    const GPTConfig mc = model_config(cfg);  // the preset, or --layers
    const int pipelines = schedule == "chimera" ? 2 : 1;  // Chimera: two chunks, one per pipeline
    if (pipelines == 2) make_schedule(schedule, p, m, v);  // an odd p first, before the layers
    const std::string err = GPTPartition::check(mc.layers, p, pipelines == 2 ? 2 : v, pipelines);
    if (!err.empty()) return err + " for model " + mc.name;
    make_schedule(schedule, p, m, v);  // the schedule's own constraints (m % p, ...)
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

StageSpec pipeline_stage_spec(const PipelineStageOptions& o) {
  auto opts = std::make_shared<PipelineStageOptions>(o);  // the flags write into it
  StageSpec spec;
  spec.name = o.name;
  spec.summary = o.summary;
  spec.default_world_size = o.default_world_size;
  spec.default_layers = o.default_layers;
  spec.supports_trace = true;  // finish() writes --trace (pipeline_strategy.h)
  // --clip_grad: the norm over pp of each rank's owned stages (PipelineStrategy::train_step).
  spec.supports_clip_grad = true;
  // --precision bf16 / fp16: 16-bit parameters and messages, fp32 gradients (pipeline_strategy.h).
  // A stage with its own step (make_strategy: PipeDream-2BW) says itself what it takes.
  spec.supports_precision = !o.make_strategy;
  // p = world size: one pipeline stage per rank, each seeing all B sequences (as micro-batches).
  spec.grid = [](const TrainConfig& cfg) { return GridShape{1, cfg.world_size, 1}; };
  spec.add_flags = [opts](CLI::App& app) {
    if (opts->micro_batches_flag)
      add_option(app, "--micro_batches", opts->micro_batches,
                 "m: micro-batches per global batch (the pipeline's unit of work)");
    if (opts->chunks_flag)
      add_option(app, "--chunks", opts->chunks, "v: model chunks (virtual stages) per rank");
  };
  auto check = [opts](const TrainConfig& cfg) {
    std::string err = pipeline_config_error(cfg, opts->schedule, opts->micro_batches, opts->chunks);
    if (err.empty() && opts->extra_check) err = opts->extra_check(cfg.world_size, opts->micro_batches);
    return err;
  };
  spec.validate = [check](const TrainConfig& cfg) {
    const std::string err = check(cfg);
    if (!err.empty()) user_error(err);
  };
  spec.make = [opts, check](const StageContext& ctx) -> std::unique_ptr<Strategy> {
    // Inside the ranks (also when started by mpiexec directly, skipping the launcher's checks).
    const std::string err = check(ctx.cfg);
    all_ranks_ok(err.empty(), err);
    if (opts->make_strategy) return opts->make_strategy(ctx, opts->micro_batches);
    ProcessGroup& pp = ctx.grid.pp_group();  // every rank of the world, stage s on rank s
    Schedule s = make_schedule(opts->schedule, pp.size(), opts->micro_batches, opts->chunks);
    auto strategy = std::make_unique<PipelineStrategy>(ctx.model, pp, ctx.opt, ctx.cfg.seed,
                                                       std::move(s), ctx.cfg.trace,
                                                       opts->clock_costs, ctx.mp);
    if (opts->bubble_formula) {
      const double f = opts->bubble_formula(pp.size(), opts->micro_batches, opts->chunks);
      if (f >= 0) strategy->set_bubble_formula(f, opts->bubble_formula_text);
    }
    return strategy;
  };
  return spec;
}

}  // namespace llmp
