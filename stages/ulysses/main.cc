// bazel run //stages/ulysses:train  — DeepSpeed-Ulysses on 4 ranks: every sequence split over the
// ranks, all_to_all to a head split around attention. Long sequences:
//   bazel run //stages/ulysses:train -- --model tiny --ctx 2048 --global_batch 4 --steps 10
// Flags: bazel run //stages/ulysses:train -- --help
#include <memory>

#include "common/cp/cp_stage.h"
#include "common/cp/ulysses.h"

int main(int argc, char** argv) {
  llmp::CpStageOptions o;
  o.name = "ulysses";
  o.summary = "DeepSpeed-Ulysses: sequences split over p ranks, all_to_all to H/p heads of the "
              "whole sequence for attention and back";
  o.make_core = [](llmp::ProcessGroup& g) -> std::unique_ptr<llmp::AttentionCore> {
    return std::make_unique<llmp::UlyssesAttention>(g);
  };
  o.split_error = llmp::UlyssesAttention::split_error;
  return llmp::train_main(argc, argv, llmp::cp_stage_spec(o));
}
