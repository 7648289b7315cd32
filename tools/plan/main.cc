// tools/plan: the 3D-parallelism planner. Ranks every dp × pp × tp configuration (with sequence
// parallelism, ZeRO 0-3, micro-batches, interleaving, recomputation) of a cluster for a model and
// a global batch by predicted step time, and says why the alternatives lost.
//
//   bazel run //tools/plan -- --config tools/plan/examples/gpt3_175b_1024_a100.json
//   bazel run //tools/plan -- --preset mini --batch 32 --gpus-per-node 8 --nodes 1
//
// The cost model: cost_model.h; the search: search.h; the inputs: input.h; README.md has the
// equations, the assumptions and the comparison with Megatron-LM's published configurations.
// Bad input: one line "error: ..." on stderr, exit status 2.
#include <cstdio>
#include <stdexcept>

#include "tools/plan/input.h"
#include "tools/plan/render.h"
#include "tools/plan/search.h"

int main(int argc, char** argv) {
  using namespace llmp::plan;
  PlanInput in;
  try {
    in = parse_input(argc, argv);
  } catch (const PlanInputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  if (in.help) {
    std::printf("%s", in.help_text.c_str());
    return 0;
  }
  try {
    const SearchResult res = search(in.model, in.batch, in.cluster, in.options);
    std::printf("%s", render_report(in, res).c_str());
  } catch (const std::invalid_argument& e) {  // no valid configuration: the inputs' fault
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
