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
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>

#include "common/data/corpus.h"
#include "common/nn/gpt.h"
#include "common/nn/moe_routing.h"
#include "common/runtime/check.h"
#include "common/runtime/flags.h"
#include "stages/moe/table.h"

int main(int argc, char** argv) {
  using namespace llmp;
  TableRun run;
  run.progress = true;
  std::string dense_name = "mini", moe_name = "moe-mini";
  double capacity_factor = std::numeric_limits<double>::quiet_NaN();
  CLI::App app{"moe table: a mixture of experts against the dense model of equal per-token "
               "compute, both on one rank, measured"};
  app.add_option("--steps", run.steps, "optimizer steps of each model")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--global_batch", run.global_batch, "B sequences per step")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--data", run.data, "corpus file or folder (common/data)")->capture_default_str();
  app.add_option("--seed", run.seed, "initialisation and sampling seed (both models)")->capture_default_str();
  app.add_option("--eval_batches", run.eval_batches, "validation batches per loss")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--eval_every", run.eval_every, "validation loss every this many steps too (0: end only)")->check(CLI::Range(0, 1000000))->capture_default_str();
  app.add_option("--dense_model", dense_name, "the dense preset")->capture_default_str();
  app.add_option("--moe_model", moe_name, "the mixture-of-experts preset (same V, T, C, H, L)")->capture_default_str();
  app.add_option("--capacity_factor", capacity_factor, "c > 0 overriding the MoE preset's");
  parse_flags_or_exit(app, argc, argv);

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
