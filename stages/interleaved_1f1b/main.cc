// bazel run //stages/interleaved_1f1b:train  — interleaved 1F1B on 4 ranks, v = 2 chunks each,
// 8 micro-batches (mpiexec is started for you). p·v = 8 virtual stages need L divisible by 8, so
// the default model is mini with --layers 8 (1.63M parameters); --layers 4 --world_size 2 runs
// plain mini.
// Flags: bazel run //stages/interleaved_1f1b:train -- --help  (--micro_batches, --chunks, --trace)
#include "common/pipeline/pipeline_stage.h"
#include "common/train/train_main.h"
#include "stages/interleaved_1f1b/interleaved_1f1b.h"

int main(int argc, char** argv) {
  llmp::PipelineStageOptions o;
  o.name = "interleaved_1f1b";
  o.summary = "interleaved 1F1B (Megatron): v model chunks per rank, bubble / v";
  o.schedule = "interleaved_1f1b";
  o.default_world_size = 4;
  o.default_layers = 8;
  o.micro_batches = 8;
  o.chunks = 2;
  o.chunks_flag = true;
  o.bubble_formula = [](int p, int m, int v) {
    return llmp::interleaved_bubble_fraction(p, m, v);
  };
  o.bubble_formula_text = "(p-1)/(v·m+p-1)";
  llmp::StageSpec spec = llmp::pipeline_stage_spec(o);
  spec.supports_device = true;  // --device cuda (fp32): activations and gradients staged p2p
  return llmp::train_main(argc, argv, spec);
}
