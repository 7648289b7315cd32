// bazel run //stages/naive_pp:train  — the naive pipeline on 4 ranks: the whole batch at once,
// one rank busy at a time (mpiexec is started for you). Flags: -- --help  (--trace out.json)
#include "common/pipeline/pipeline_stage.h"
#include "common/train/train_main.h"
#include "stages/naive_pp/naive_pp.h"

int main(int argc, char** argv) {
  llmp::PipelineStageOptions o;
  o.name = "naive_pp";
  o.summary = "naive pipeline: layers split over ranks, the whole batch as one micro-batch";
  o.schedule = "naive";
  o.default_world_size = 4;
  o.micro_batches = 1;
  o.micro_batches_flag = false;  // m = 1 is the point: GPipe adds micro-batches
  o.bubble_formula = [](int p, int, int) { return llmp::naive_pp_bubble_fraction(p); };
  o.bubble_formula_text = "(p-1)/p";
  llmp::StageSpec spec = llmp::pipeline_stage_spec(o);
  spec.supports_device = true;  // --device cuda (fp32): activations and gradients staged p2p
  return llmp::train_main(argc, argv, spec);
}
