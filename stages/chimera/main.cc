// bazel run //stages/chimera:train  — Chimera on 4 ranks, 8 micro-batches (mpiexec is started for you).
// Flags: bazel run //stages/chimera:train -- --help   (--micro_batches m, a multiple of p; --trace out.json)
#include "common/pipeline/pipeline_stage.h"
#include "common/train/train_main.h"
#include "stages/chimera/chimera.h"

int main(int argc, char** argv) {
  llmp::PipelineStageOptions o;
  o.name = "chimera";
  o.summary = "Chimera: two pipelines in opposite directions over the same ranks";
  o.schedule = "chimera";
  o.default_world_size = 4;
  o.micro_batches = 8;
  o.bubble_formula = [](int p, int m, int) { return llmp::chimera_bubble_fraction(p, m); };
  o.bubble_formula_text = "(p-2)/(2m+p-2)";
  o.clock_costs = llmp::chimera_clock_costs();
  llmp::StageSpec spec = llmp::pipeline_stage_spec(o);
  spec.supports_device = true;  // --device cuda (fp32): activations and gradients staged p2p
  return llmp::train_main(argc, argv, spec);
}
