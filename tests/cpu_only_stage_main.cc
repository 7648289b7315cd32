// A fixture of device_flag_test.sh (case device_unsupported): Megatron tensor parallelism's stage
// (common/tp/tp_stage.h) under the name "cpu_only_stage" with StageSpec::supports_device left
// false, so --device cuda meets train_main's "runs on the CPU only" refusal. Every real stage
// takes --device since tp_3d gained it; this keeps that refusal, the one a new stage without a
// device path gets, exercised. Without --device it trains as tensor_parallel does.
#include "common/tp/tp_stage.h"
#include "common/train/train_main.h"

int main(int argc, char** argv) {
  llmp::TpStageOptions o;
  o.name = "cpu_only_stage";
  o.summary = "tensor_parallel's stage without --device cuda (device_flag_test's CPU-only example)";
  o.sequence_parallel = false;
  o.default_world_size = 2;
  o.supports_device = false;
  return llmp::train_main(argc, argv, llmp::tp_stage_spec(o));
}
