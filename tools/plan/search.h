// The planner's search: every configuration of the cluster's GPUs the closed forms accept, its
// predicted cost (cost_model.h), the ones that fit ranked by predicted step time, and for each
// value of each knob that the best plan did not take, the best plan that takes it and the number
// that made it lose. No rule of thumb is coded here: "tensor parallelism inside a node" or "no
// ZeRO-2 under a pipeline" come out of the comparison of the predicted seconds and bytes.
//
// Enumerated: dp·pp·tp = N (the cluster's GPUs; when no configuration of N is valid for the
// model and batch, the largest N' < N that has one, with a note), tp | H, 4C, V; pp | L;
// dp | B; sp on/off (tp > 1, tp | T); ZeRO 0..max_zero (dp > 1; with dp = 1 all stages are the
// same: only 0); m | B/dp; v | L/pp with v ≤ max_v and, for v > 1, pp > 1 and pp | m
// (Megatron's interleaved schedule); recomputation none, selective, full.
//
// Glossary: N GPUs, B global batch, L layers, H heads, C channels, V vocab, T sequence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/plan/cost_model.h"

namespace llmp::plan {

struct SearchOptions {
  int max_v = 4;       ///< largest interleaving (chunks per rank) tried
  int max_zero = 3;    ///< largest ZeRO stage tried (0..3)
  bool mixed = true;   ///< mixed precision (else fp32 everywhere)
  /// Knobs held fixed (e.g. a published configuration, to compare with the best): 0 or -1 = free.
  int tp = 0, pp = 0, dp = 0, m = 0, v = 0, zero = -1, sp = -1, recompute = -1;
};

struct SearchResult {
  int gpus = 0;                 ///< N' = dp·pp·tp of every configuration below
  std::string note;             ///< why N' < N, if it is
  std::vector<PlanCost> all;    ///< every valid configuration
  std::vector<size_t> ranked;   ///< indices into `all` of those that fit, fastest first
};

/// A value of one knob that the best plan did not take, and why it lost.
struct Alternative {
  std::string label;   ///< e.g. "tp = 16"
  bool fits = false;   ///< some configuration with this value fits in memory
  size_t index = 0;    ///< the fastest fitting one, or else the one with the least memory
  std::string reason;  ///< from the numbers, e.g. "tp all_reduces inter-node: +1.2 s"
};

/// Enumerates and evaluates (file comment). Throws std::invalid_argument when no configuration
/// on any N' ≤ N is valid for the model and batch.
SearchResult search(const ModelSpec& model, int64_t B, const Cluster& cluster,
                    const SearchOptions& opt = {});

/// For each of tp, pp, dp, sp, ZeRO, v, recompute and each value the best plan did not take:
/// the best configuration that takes it and the reason it lost, computed as the largest
/// difference of the step's components (compute, bubble, each group's seconds) or, when nothing
/// with the value fits, the memory over the limit. Empty when nothing fits.
std::vector<Alternative> alternatives(const SearchResult& result, const Cluster& cluster);

}  // namespace llmp::plan
