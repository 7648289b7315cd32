// bazel run //stages/interleaved_1f1b:train  — interleaved 1F1B on 2 ranks, v = 2 chunks each,
// 8 micro-batches (mpiexec is started for you). Two ranks by default: mini has L = 4 layers and
// needs p·v to divide them (4 ranks × 2 chunks would need 8 layers).
// Flags: bazel run //stages/interleaved_1f1b:train -- --help  (--micro_batches, --chunks, --trace)
#include "common/pipeline/pipeline_stage.h"
#include "common/train/train_main.h"

int main(int argc, char** argv) {
  llmp::PipelineStageOptions o;
  o.name = "interleaved_1f1b";
  o.summary = "interleaved 1F1B (Megatron): v model chunks per rank, bubble / v";
  o.schedule = "interleaved_1f1b";
  o.default_world_size = 2;
  o.micro_batches = 8;
  o.chunks = 2;
  o.chunks_flag = true;
  return llmp::train_main(argc, argv, llmp::pipeline_stage_spec(o));
}
