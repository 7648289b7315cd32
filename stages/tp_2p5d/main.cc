// bazel run //stages/tp_2p5d:train  — Tesseract 2.5D tensor parallelism, P = q×q×d = 8 ranks
// (q = 2, --depth 2), mini. Flags: bazel run //stages/tp_2p5d:train -- --help
#include "common/tp2d/tp2d_stage.h"
#include "common/train/train_main.h"

int main(int argc, char** argv) {
  llmp::Tp2dStageOptions o;
  o.name = "tp_2p5d";
  o.summary = "Tesseract 2.5D tensor parallelism: d layers of q×q SUMMA grids, batch over depth";
  o.depth_flag = true;
  o.default_depth = 2;
  o.default_world_size = 8;
  o.supports_device = true;  // --device cuda (fp32): SUMMA's products and buffers on the device
  return llmp::train_main(argc, argv, llmp::tp2d_stage_spec(o));
}
