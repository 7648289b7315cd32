// bazel run //stages/hybrid_3d:train  — 3D parallelism on 8 ranks: dp 2 × pp 2 × tp 2, mini.
// Flags: bazel run //stages/hybrid_3d:train -- --help   (--dp --pp --tp --micro_batches --chunks
// --sequence_parallel --zero; --device cuda: fp32 on the GPUs, README.md "On a GPU")
#include "common/train/train_main.h"
#include "stages/hybrid_3d/hybrid_stage.h"

int main(int argc, char** argv) { return llmp::train_main(argc, argv, llmp::hybrid_stage_spec()); }
