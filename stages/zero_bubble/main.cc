// bazel run //stages/zero_bubble:train  — ZB-H1 on 4 ranks, 8 micro-batches (mpiexec is started
// for you). Flags: bazel run //stages/zero_bubble:train -- --help  (--micro_batches, --trace)
#include "common/pipeline/pipeline_stage.h"
#include "common/train/train_main.h"
#include "stages/zero_bubble/zero_bubble.h"

int main(int argc, char** argv) {
  llmp::PipelineStageOptions o;
  o.name = "zero_bubble";
  o.summary = "zero bubble ZB-H1: backward split into B and W, W fills the bubbles";
  o.schedule = "zb_h1";
  o.default_world_size = 4;
  o.micro_batches = 8;
  o.bubble_formula = [](int p, int m, int) {  // the paper's figure holds for m ≥ p
    return m >= p ? llmp::zb_h1_bubble_fraction(p, m) : -1.0;
  };
  o.bubble_formula_text = "(p-1)/(3m+p-1)";
  llmp::StageSpec spec = llmp::pipeline_stage_spec(o);
  spec.supports_device = true;  // --device cuda (fp32): activations and gradients staged p2p
  return llmp::train_main(argc, argv, spec);
}
