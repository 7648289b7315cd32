// bazel run //stages/pipedream_2bw:train  — PipeDream-2BW on 4 ranks, 8 micro-batches per step
// (mpiexec is started for you). Flags: -- --help  (--micro_batches m >= p, --trace out.json)
#include <memory>

#include "common/pipeline/pipeline_stage.h"
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
                                    ctx.cfg.steps, ctx.cfg.trace);
  };
  llmp::StageSpec spec = llmp::pipeline_stage_spec(o);
  // --clip_grad: each update clips by the norm of the gradient it applies, g(t) (taken at W(t-1)).
  spec.supports_device = true;  // --device cuda (fp32): activations and gradients staged p2p
  return llmp::train_main(argc, argv, spec);
}
