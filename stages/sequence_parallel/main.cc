// bazel run //stages/sequence_parallel:train  — Megatron sequence parallelism on top of tensor
// parallelism, t = 4 ranks, mini. Flags: bazel run //stages/sequence_parallel:train -- --help
#include "common/tp/tp_stage.h"
#include "common/train/train_main.h"

int main(int argc, char** argv) {
  llmp::TpStageOptions o;
  o.name = "sequence_parallel";
  o.summary = "Megatron sequence parallelism: tensor parallelism with LayerNorms and residuals "
              "split along the sequence";
  o.sequence_parallel = true;
  o.default_world_size = 4;
  o.supports_device = true;  // --device cuda: the sequence collectives on device tensors
  return llmp::train_main(argc, argv, llmp::tp_stage_spec(o));
}
