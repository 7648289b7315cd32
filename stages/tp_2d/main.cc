// bazel run //stages/tp_2d:train  — Optimus 2D tensor parallelism (SUMMA), P = q×q = 4 ranks,
// mini. Flags: bazel run //stages/tp_2d:train -- --help   (q = √P from --world_size)
#include "common/tp2d/tp2d_stage.h"
#include "common/train/train_main.h"

int main(int argc, char** argv) {
  llmp::Tp2dStageOptions o;
  o.name = "tp_2d";
  o.summary = "Optimus 2D tensor parallelism: activations and weights in q×q blocks, SUMMA";
  o.depth_flag = false;
  o.default_depth = 1;
  o.default_world_size = 4;
  o.supports_device = true;  // --device cuda (fp32): SUMMA's products and buffers on the device
  return llmp::train_main(argc, argv, llmp::tp2d_stage_spec(o));
}
