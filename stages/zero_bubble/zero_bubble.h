// Zero bubble (ZB-H1): split the backward in two and fill the bubbles with the weight half.
//
// Qi, Wan, Huang, Lin 2023, "Zero Bubble Pipeline Parallelism" (ICLR 2024), §2-3.1, Fig. 3.
// The backward of a layer y = x·W is two products: B, the input gradient dx = dy·Wᵀ that the
// previous stage is waiting for, and W, the weight gradient dW = xᵀ·dy that only the optimizer
// step needs. ZB-H1 runs 1F1B's order with B in place of the full backward, sends B's result at
// once, and defers W's into what would be idle time (common/pipeline/schedule_zero_bubble.cc).
// Rank r defers its first r W's, so every rank holds at most p micro-batches (F done, W not
// done): 1F1B's peak, and the bubble shrinks from (p-1)(T_F+T_B+T_W) to (p-1)(T_F+T_B-T_W):
//
//   bubble fraction, T_F = T_B = T_W:  (p-1)/(3m + p-1)      (1F1B: 3(p-1)/(3m + 3(p-1)))
//
// In this code B and W are the two halves of the block's one backward (GPT::block_backward_input
// and _weight, common/nn/gpt_block.cc): B
// computes every input gradient and KEEPS the output gradient of each weight layer (11·b·T·C
// floats per block) until W turns them into dW. That is the honest cost of deferring W: more
// activation memory per micro-batch between its B and its W (B frees attention's probabilities
// and the pre-GELU activations, which W does not read). The first stage's embedding has no input
// to pass on: its whole backward is W. The last stage's head runs fused in F (gpt.h), as in
// every pipeline stage here.
//
// Glossary: p pipeline stages (ranks), r rank, m micro-batches, F forward, B input gradient,
// W weight gradient, T_X the time of X, b micro-batch size, T sequence, C channels.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"
#include "common/pipeline/pipeline_strategy.h"

namespace llmp {

/// ZB-H1's bubble fraction with T_F = T_B = T_W = 1 and m ≥ p: (p-1)/(3m + p-1).
double zb_h1_bubble_fraction(int p, int m);

/// Micro-batches with activations (F done, W not done) on rank r at its peak: min(p, m).
int zb_h1_peak_in_flight(int p, int m, int r);

/// ZB-H1 over the ranks of `pp` (p = pp.size()) with m micro-batches. Collective.
std::unique_ptr<PipelineStrategy> make_zero_bubble(const GPT& model, ProcessGroup& pp,
                                                   AdamWConfig opt, uint64_t seed, int m,
                                                   const std::string& trace = "");

}  // namespace llmp
