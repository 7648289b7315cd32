// bazel run //stages/tensor_parallel:train  — Megatron 1D tensor parallelism, t = 4 ranks, mini
// (one head per rank). Flags: bazel run //stages/tensor_parallel:train -- --help   (--tp t)
#include "common/tp/tp_stage.h"
#include "common/train/train_main.h"

int main(int argc, char** argv) {
  llmp::TpStageOptions o;
  o.name = "tensor_parallel";
  o.summary = "Megatron tensor parallelism: heads, MLP columns and vocabulary split over t ranks";
  o.sequence_parallel = false;
  o.default_world_size = 4;
  o.supports_device = true;  // --device cuda: f and g on device tensors
  return llmp::train_main(argc, argv, llmp::tp_stage_spec(o));
}
