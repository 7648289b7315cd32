// bazel run //stages/1f1b:train  — 1F1B on 4 ranks, 8 micro-batches (mpiexec is started for you).
// Flags: bazel run //stages/1f1b:train -- --help   (--micro_batches m, --trace out.json)
#include "common/pipeline/pipeline_stage.h"
#include "common/train/train_main.h"
#include "stages/1f1b/1f1b.h"

int main(int argc, char** argv) {
  llmp::PipelineStageOptions o;
  o.name = "1f1b";
  o.summary = "1F1B (PipeDream-Flush): warm-up, one forward one backward, cool-down";
  o.schedule = "1f1b";
  o.default_world_size = 4;
  o.micro_batches = 8;
  o.bubble_formula = [](int p, int m, int) { return llmp::one_f_one_b_bubble_fraction(p, m); };
  o.bubble_formula_text = "(p-1)/(m+p-1)";
  llmp::StageSpec spec = llmp::pipeline_stage_spec(o);
  spec.supports_device = true;  // --device cuda (fp32): activations and gradients staged p2p
  return llmp::train_main(argc, argv, spec);
}
