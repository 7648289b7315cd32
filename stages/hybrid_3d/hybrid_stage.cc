// hybrid_stage_spec (see hybrid_stage.h).
#include "stages/hybrid_3d/hybrid_stage.h"

#include <memory>
#include <stdexcept>

#include "common/pipeline/schedule.h"
#include "common/plan/hybrid_formulas.h"
#include "common/runtime/check.h"
#include "common/runtime/options.h"

namespace llmp {

std::string hybrid_config_error(const TrainConfig& cfg, const HybridFlags& f) {
  const HybridOptions& o = f.options;
  if (o.micro_batches < 1)
    return "--micro_batches " + std::to_string(o.micro_batches) + " must be at least 1";
  if (o.chunks < 1) return "--chunks " + std::to_string(o.chunks) + " must be at least 1";
  if (o.zero != 1 && o.zero != 2)
    return "--zero " + std::to_string(o.zero) + " must be 1 or 2 (the ZeRO stage over dp)";
  if (cfg.partition_activations)
    return "--partition_activations is not supported by hybrid_3d (use --sequence_parallel, "
           "which splits the activations over tp instead)";
  try {
    const GPTConfig mc = model_config(cfg);
    // Every divisibility the grid needs, with hybrid_formulas' messages.
    hybrid_rank_plan({mc.padded_vocab(), mc.ctx, mc.layers, mc.d, mc.heads},
                     {f.dp, f.pp, f.tp, o.micro_batches, o.chunks, o.sequence_parallel}, 0,
                     cfg.global_batch, mc.ctx);
    make_schedule(o.chunks > 1 ? "interleaved_1f1b" : "1f1b", f.pp, o.micro_batches, o.chunks);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

StageSpec hybrid_stage_spec() {
  auto f = std::make_shared<HybridFlags>();  // the parser writes into it
  StageSpec spec;
  spec.name = "hybrid_3d";
  spec.summary = "3D parallelism: dp × pp × tp (Megatron TP/SP inside 1F1B stages), ZeRO-1 over dp";
  spec.default_world_size = 8;
  spec.supports_trace = true;
  spec.supports_device = true;  // --device cuda: every state and buffer on the GPU
  // --precision bf16 / fp16: 16-bit parameters and messages, fp32 gradients, the master copy on
  // the ZeRO shard (hybrid_3d.h)
  spec.supports_precision = true;
  spec.supports_clip_grad = true;  // the owned elements of each ZeRO shard, over the world
  spec.grid = [f](const TrainConfig&) { return GridShape{f->dp, f->pp, f->tp}; };
  spec.add_flags = [f](CLI::App& app) {
    add_option(app, "--dp", f->dp, "data-parallel size (ZeRO-1 over it)");
    add_option(app, "--pp", f->pp, "pipeline-parallel size p");
    add_option(app, "--tp", f->tp, "tensor-parallel size t (adjacent ranks)");
    add_option(app, "--micro_batches", f->options.micro_batches,
               "m: micro-batches per replica and step");
    add_option(app, "--chunks", f->options.chunks,
               "v: model chunks per pipeline rank (>1: interleaved)");
    add_flag(app, "--sequence_parallel", f->options.sequence_parallel,
             "Megatron sequence parallelism inside each stage");
    add_option(app, "--zero", f->options.zero,
               "ZeRO stage over dp: 1 (one reduce_scatter per step) or 2 (gradient shard, "
               "every micro-batch reduce-scattered)");
  };
  spec.validate = [f](const TrainConfig& cfg) {
    const std::string err = hybrid_config_error(cfg, *f);
    if (!err.empty()) user_error(err);
  };
  spec.make = [f](const StageContext& ctx) -> std::unique_ptr<Strategy> {
    const std::string err = hybrid_config_error(ctx.cfg, *f);  // mpiexec started directly
    all_ranks_ok(err.empty(), err);
    HybridOptions o = f->options;
    o.trace_path = ctx.cfg.trace;
    o.device = ctx.model.device();  // train_main's model: GPT::with_device(--device)
    o.mp = ctx.mp;
    return std::make_unique<HybridStrategy>(ctx.model.config(), ctx.grid, ctx.opt, ctx.cfg.seed,
                                            o);
  };
  return spec;
}

}  // namespace llmp
