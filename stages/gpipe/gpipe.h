// GPipe: micro-batched pipeline parallelism with a synchronous flush.
//
// Huang et al. 2019, "GPipe: Efficient Training of Giant Neural Networks using Pipeline
// Parallelism" (NeurIPS), §2.2-2.3 and Fig. 2c. The model is cut into p stages (one per rank);
// the global batch of B sequences is cut into m micro-batches of b = B/m. Every rank runs
//
//   warm-up/steady:  F0 F1 ... F(m-1)      all forwards (recv_forward, F, send_forward)
//   cool-down:       B(m-1) ... B1 B0      all backwards (recv_backward, B, send_backward)
//
// then one optimizer step on the accumulated gradients (the "flush": every micro-batch of the
// step sees the same weights, so the result equals one big batch — which the test checks against
// the single-rank baseline). The pipe fills for p-1 slots and drains for p-1 slots:
//
//   bubble fraction = (p-1)/(m+p-1)        (F = B = one slot; (p-1)/m of the ideal time)
//   activations per rank: m micro-batches' worth = the whole batch's, whatever m is.
//
// More micro-batches shrink the bubble but not the memory; 1F1B (stages/1f1b) fixes the memory.
// The schedule itself is data: common/pipeline/schedule_gpipe.cc; the executor that runs it:
// common/pipeline/executor.h.
//
// Glossary: p pipeline stages (ranks), m micro-batches, B global batch, b = B/m, F forward,
// B backward, bubble = idle rank-time.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"
#include "common/pipeline/pipeline_strategy.h"

namespace llmp {

/// Bubble fraction of GPipe with unit forward and backward: (p-1)/(m+p-1).
double gpipe_bubble_fraction(int p, int m);

/// (micro-batch) activations rank r holds at its peak: all m (every rank).
int gpipe_peak_in_flight(int p, int m, int r);

/// GPipe over the ranks of `pp` (p = pp.size()) with m micro-batches. Collective.
std::unique_ptr<PipelineStrategy> make_gpipe(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                             uint64_t seed, int m, const std::string& trace = "");

}  // namespace llmp
