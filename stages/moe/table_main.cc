// bazel run //stages/moe:table  — the dense model and the mixture of experts of equal per-token
// compute, trained side by side on one rank (the baseline's trainer) on the same data from the
// same seed for the same steps, in one Markdown table: parameters, FLOPs per token (measured by
// the kernels' counter, next to the closed form of table.h), tokens/s, validation loss, then the
// validation loss by step and the MoE's routing line. One rank each, so tokens/s compare; no MPI
// job is started.
//
//   bazel run //stages/moe:table                                   # mini vs moe-mini, 300 steps
//   bazel run //stages/moe:table -- --steps 50 --capacity_factor 1  # no capacity padding
//
// Glossary: B sequences per step, T sequence length, c capacity factor.
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/data/corpus.h"
#include "common/nn/gpt.h"
#include "common/nn/moe_routing.h"
#include "common/runtime/check.h"
#include "common/runtime/flags.h"
#include "common/runtime/options.h"
#include "stages/moe/table.h"

int main(int argc, char** argv) {
  using namespace llmp;
  TableRun run;
  run.progress = true;
  std::string dense_name = "mini", moe_name = "moe-mini";
  double capacity_factor = std::numeric_limits<double>::quiet_NaN();
  const AppPtr app = make_app("moe table: a mixture of experts against the dense model of equal "
                               "per-token compute, both on one rank, measured");
  add_option(*app, "--steps", run.steps, "optimizer steps of each model", in_range(1, 1000000));
  add_option(*app, "--global_batch", run.global_batch, "B sequences per step", in_range(1, 4096));
  add_option(*app, "--data", run.data, "corpus file or folder (common/data)");
  add_option(*app, "--seed", run.seed, "initialisation and sampling seed (both models)");
  add_option(*app, "--eval_batches", run.eval_batches, "validation batches per loss",
             in_range(1, 1000));
  add_option(*app, "--eval_every", run.eval_every,
             "validation loss every this many steps too (0: end only)", in_range(0, 1000000));
  add_option(*app, "--dense_model", dense_name, "the dense preset");
  add_option(*app, "--moe_model", moe_name, "the mixture-of-experts preset (same V, T, C, H, L)");
  add_option_no_default(*app, "--capacity_factor", capacity_factor,
                        "c > 0 overriding the MoE preset's");
  parse_flags_or_exit(*app, argc, argv);

  GPTConfig dense, moe;
  try {
    dense = GPTConfig::preset(dense_name);
    moe = GPTConfig::preset(moe_name);
    if (!std::isnan(capacity_factor)) {
      const std::string err = routing_error(moe.experts, moe.top_k, capacity_factor);
      if (!err.empty()) throw std::invalid_argument(err);
      moe.capacity_factor = capacity_factor;
    }
    Corpus::load(run.data, dense.ctx);  // the corpus's one-line error before any training
  } catch (const std::exception& e) {
    user_error(e.what());
  }
  std::string markdown;
  try {
    markdown = table_markdown(dense_vs_moe(dense, moe, run), run);
  } catch (const std::invalid_argument& e) {
    user_error(e.what());
  }
  std::printf("%s", markdown.c_str());
  return 0;
}
