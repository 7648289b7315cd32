// bazel run //stages/tp_3d:train  — 3D tensor parallelism (Bian et al. 2021), P = 8 ranks (q = 2),
// mini. Flags: bazel run //stages/tp_3d:train -- --help   (q = ∛--world_size)
#include "common/tp3d/tp3d_stage.h"
#include "common/train/train_main.h"

int main(int argc, char** argv) { return llmp::train_main(argc, argv, llmp::tp3d_stage_spec()); }
