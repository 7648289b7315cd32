// bazel run //stages/ring_self_attention:train  — Colossal-AI's sequence parallelism (ring
// self-attention) on 4 ranks: every sequence split over the ranks, the scores of the local
// queries against every key by a ring of key chunks, the output by a ring of value chunks.
// Long sequences:
//   bazel run //stages/ring_self_attention:train -- --model tiny --ctx 2048 --global_batch 4
// On a GPU (one per rank): ... -- --device cuda
// Flags: bazel run //stages/ring_self_attention:train -- --help
#include <memory>

#include "common/cp/cp_stage.h"
#include "common/cp/ring_self_attention.h"

int main(int argc, char** argv) {
  llmp::CpStageOptions o;
  o.name = "ring_self_attention";
  o.summary = "ring self-attention (Li et al. 2021): sequences split over p ranks, key then value "
              "chunks passed around a ring";
  o.make_core = [](llmp::ProcessGroup& g) -> std::unique_ptr<llmp::AttentionCore> {
    return std::make_unique<llmp::RingSelfAttention>(g);
  };
  o.split_error = llmp::RingSelfAttention::split_error;
  return llmp::train_main(argc, argv, llmp::cp_stage_spec(o));
}
