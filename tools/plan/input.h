// The planner's inputs: a small JSON config file (nlohmann-json) and/or flags (CLI11); a flag
// overrides the file. Every value is checked; a bad one is a PlanInputError whose message names
// it, and the binary prints it as one line "error: ..." and exits 2.
//
// JSON (every key optional except what no default covers; see examples/*.json):
//   { "model":   { "preset": "mini" }  or  { "name": "GPT-3 175B", "L": 96, "C": 12288,
//                  "H": 96, "V": 51200, "T": 2048 },            (ctx defaults to T)
//     "batch":   1536,                                            (global batch, sequences)
//     "cluster": { "gpus_per_node": 8, "nodes": 128, "memory": 80e9, "peak_flops": 312e12,
//                  "bw_intra": 300e9, "bw_inter": 25e9, "latency": 0, "efficiency": 0.75 },
//     "precision": "mixed" | "fp32",  "top": 5,  "max_v": 4,  "max_zero": 3,
//     "fix": { "tp": 8, "pp": 8, "dp": 16, "m": 96, "v": 1, "zero": 1, "sp": false,
//              "recompute": "full" } }
// Units: bytes, FLOP/s, bytes/s per GPU (each GPU's share of its link), seconds.
#pragma once

#include <stdexcept>
#include <string>

#include "tools/plan/cost_model.h"
#include "tools/plan/search.h"

namespace llmp::plan {

/// A user error in the inputs (the message names the value).
struct PlanInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PlanInput {
  ModelSpec model;
  int64_t batch = 0;
  Cluster cluster;
  SearchOptions options;
  int top = 5;
  bool help = false;       ///< --help was asked: `help_text` holds it
  std::string help_text;
};

/// Parses argv (flags, and --config FILE read first). Throws PlanInputError.
PlanInput parse_input(int argc, const char* const* argv);

/// Checks the values (positive sizes, ctx ≥ T, C divisible by H, efficiency in (0, 1], ...).
/// Throws PlanInputError naming the first bad value.
void validate(const PlanInput& in);

}  // namespace llmp::plan
