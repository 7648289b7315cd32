// bazel run //stages/pipedream_2bw:train  — PipeDream-2BW on 4 ranks, 8 micro-batches per step
// (mpiexec is started for you). Flags: -- --help  (--micro_batches m >= p, --trace out.json)
#include <memory>
#include <string>

#include "common/pipeline/pipeline_stage.h"
#include "common/runtime/check.h"
#include "common/train/mixed_precision.h"
#include "common/train/train_main.h"
#include "stages/pipedream_2bw/pipedream_2bw.h"

int main(int argc, char** argv) {
  llmp::PipelineStageOptions o;
  o.name = "pipedream_2bw";
  o.summary = "PipeDream-2BW: 1F1B without flushes, two weight versions, one-step-stale updates";
  o.schedule = "1f1b";  // the stream is one 1F1B schedule over all the run's micro-batches
  o.default_world_size = 4;
  o.micro_batches = 8;
  o.extra_check = llmp::pipedream_2bw_check;
  o.make_strategy = [](const llmp::StageContext& ctx,
                       int m) -> std::unique_ptr<llmp::Strategy> {
    return llmp::make_pipedream_2bw(ctx.model, ctx.grid.pp_group(), ctx.opt, ctx.cfg.seed, m,
                                    ctx.cfg.steps, ctx.cfg.trace, ctx.mp);
  };
  llmp::StageSpec spec = llmp::pipeline_stage_spec(o);
  // --precision bf16 (pipedream_2bw.h: two 16-bit versions, fp32 gradients, the master copy);
  // fp16 refused by name before launch, and again inside the ranks.
  spec.supports_precision = true;
  spec.validate = [check = spec.validate](const llmp::TrainConfig& cfg) {
    check(cfg);
    const std::string err = llmp::pipedream_2bw_precision_check(
        llmp::mixed_precision_config(cfg).precision);
    if (!err.empty()) llmp::user_error(err);
  };
  // --clip_grad: each update clips by the norm of the gradient it applies, g(t) (taken at W(t-1)).
  spec.supports_device = true;  // --device cuda: activations and gradients staged p2p
  return llmp::train_main(argc, argv, spec);
}
