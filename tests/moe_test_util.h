// Test helpers of the mixture-of-experts stage (stages/moe): the models it trains, its grid over
// the test world, and its equivalence run against the single-rank MoE trainer (the baseline's
// SingleRankStrategy) that also keeps both sides' routing statistics and final states.
//
// Why a harness of its own and not run_against_baseline (tests/equivalence.h): that one builds
// its model from a preset name, and the MoE tests vary what the preset fixes (k, c, which blocks
// are MoE); and it returns no routing statistics, which must match the baseline's exactly (a
// token group is one sequence, so every split of the batch drops the same tokens: moe_routing.h).
// The loop is the same: baseline on the whole global batch, then the stage on this rank's slice,
// step s on training batch s of the fortunes corpus, the llm.c-style largest relative difference.
//
// Glossary: W ranks (the test world), ep expert-parallel ranks, D = W/ep, E experts, k experts
// per token, c capacity factor, B global batch, T sequence length.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/comm/grid.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "stages/moe/moe.h"
#include "tests/equivalence.h"

namespace llmp {

/// moe-tiny (L = 2, C = 32, H = 2, T = 16, V = 256, E = 4; block 1 MoE) with k, c, n
/// (moe_every) and E set: moe_tiny(2, 1.0, 2) is the preset itself.
GPTConfig moe_tiny(int top_k, double capacity_factor, int moe_every, int experts = 4);

/// The stage's grid W/ep × 1 × ep over all ranks, one per ep for the whole test binary (the
/// strategy keeps references to its groups, so they must outlive it). Collective on first use.
ProcessGrid& moe_grid(int ep);

/// ExpertParallelStrategy over moe_grid(ep) for `model` (its activations in mp's dtype).
std::unique_ptr<ExpertParallelStrategy> make_moe_strategy(const GPT& model, int ep,
                                                          AdamWConfig opt, uint64_t seed,
                                                          MixedPrecisionConfig mp = {});

/// The expert-parallel sizes the test world allows with E experts: the divisors of W that
/// divide E, largest (ep = W) first.
std::vector<int> moe_ep_sizes(int experts);

/// What run_moe_against_baseline saw.
struct MoeEquivalence {
  EquivalenceResult r;              ///< losses and final parameters, as run_against_baseline's
  MoeStats base_routing, routing;   ///< last step's statistics, baseline and stage (all ranks)
  std::vector<float> base_state, state;  ///< get_state after the last step: p, m, v (3Ψ floats)
};

/// Collective over the test world. Trains SingleRankStrategy on the whole global batch B and
/// ExpertParallelStrategy at `ep` on this rank's B/W sequences, `steps` steps from `seed`, and
/// compares. Prints one line per step and a summary on rank 0. `mp`: both in that precision
/// (the model's activations in its storage dtype; the states compared are the fp32 master
/// weights, m and v).
MoeEquivalence run_moe_against_baseline(const GPTConfig& config, int ep, int steps = 4,
                                        int B = 8, uint64_t seed = 1234,
                                        AdamWConfig opt = {}, MixedPrecisionConfig mp = {});

/// What two training steps of the stage at `ep` measured (moe-tiny-shaped `model`, B = 8, seed 7):
/// the report, the model states the strategy allocated (MemoryTracker growth while it was built),
/// and the bytes the world and the expert-data-parallel group sent in the second step.
struct MoeStepMeasurement {
  std::vector<ReportRow> rows;
  int64_t params = 0, grads = 0, optimizer = 0;
  double world_sent = 0, edp_sent = 0;
  int64_t assignments = 0;  ///< the last step's routing over the global batch
  int64_t layout_params = 0;  ///< Ψ_d + Ψ_x: the parameters of the rank's layout
};
/// Collective over the test world. `model`'s activations in mp's dtype.
MoeStepMeasurement measure_moe_steps(const GPT& model, int ep, MixedPrecisionConfig mp = {});

/// gtest EXPECTs: the two routing statistics are the same counts (routed, kept, first per expert;
/// assignments, dropped, aux terms, forwards) and aux_sum within 1e-6 relative.
void expect_same_routing(const MoeStats& stage, const MoeStats& baseline);

}  // namespace llmp
