// bazel run //stages/ring_attention:train  — ring attention on 4 ranks: every sequence split over
// the ranks in the balanced causal split, key/value blocks around a ring, online softmax.
// Long sequences, and the naive split to compare (its report's FLOPs row differs per rank):
//   bazel run //stages/ring_attention:train -- --model tiny --heads 4 --ctx 2048 --global_batch 4
//   bazel run //stages/ring_attention:train -- --split contiguous --steps 20
// Flags: bazel run //stages/ring_attention:train -- --help
#include <memory>
#include <string>

#include "common/cp/cp_stage.h"
#include "common/cp/ring_attention.h"
#include "common/runtime/options.h"

int main(int argc, char** argv) {
  auto split = std::make_shared<std::string>("balanced");
  llmp::CpStageOptions o;
  o.name = "ring_attention";
  o.summary = "ring attention: sequences split over p ranks (balanced causal split), key/value "
              "blocks around a ring with an online softmax";
  o.add_flags = [split](CLI::App& app) {
    llmp::add_option(app, "--split", *split,
                     "which 2 of the 2p chunks a rank holds: balanced (i and 2p-1-i, equal causal "
                     "work) or contiguous (2i and 2i+1)",
                     llmp::one_of({"balanced", "contiguous"}));
  };
  o.make_core = [split](llmp::ProcessGroup& g) -> std::unique_ptr<llmp::AttentionCore> {
    using Split = llmp::RingAttention::Split;
    return std::make_unique<llmp::RingAttention>(
        g, *split == "contiguous" ? Split::kContiguous : Split::kBalanced);
  };
  o.split_error = llmp::RingAttention::split_error;
  return llmp::train_main(argc, argv, llmp::cp_stage_spec(o));
}
