// 1F1B (one forward, one backward), a.k.a. PipeDream-Flush: GPipe's bubble with bounded memory.
//
// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM" (SC'21), §2.2.1 and Fig. 3 (top); the schedule of PipeDream-Flush (Narayanan et
// al. 2021, "Memory-Efficient Pipeline-Parallel DNN Training", ICML). Rank r of p runs
//
//   warm-up:       min(p-r-1, m) forwards             (fill the pipe below it)
//   steady state:  one forward, then one backward      (the oldest micro-batch in flight)
//   cool-down:     the remaining backwards
//
// and one optimizer step per global batch (a flush, like GPipe: results equal one big batch).
// The pipe still fills and drains once, so the bubble is GPipe's:
//
//   bubble fraction = (p-1)/(m+p-1)           (F = B = one slot)
//   activations held by rank r: min(p-r, m) micro-batches   (GPipe: m)
//
// A backward starts as soon as the last stage has produced it, and frees that micro-batch's
// activations, so raising m to shrink the bubble no longer raises memory. The schedule is data:
// common/pipeline/schedule_1f1b.cc; the executor that runs it: common/pipeline/executor.h.
//
// Glossary: p pipeline stages (ranks), r rank, m micro-batches, F forward, B backward.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"
#include "common/pipeline/pipeline_strategy.h"

namespace llmp {

/// Bubble fraction of 1F1B with unit forward and backward: (p-1)/(m+p-1), the same as GPipe.
double one_f_one_b_bubble_fraction(int p, int m);

/// Micro-batches whose activations rank r holds at its peak: min(p-r, m).
int one_f_one_b_peak_in_flight(int p, int m, int r);

/// 1F1B over the ranks of `pp` (p = pp.size()) with m micro-batches. Collective.
std::unique_ptr<PipelineStrategy> make_one_f_one_b(const GPT& model, ProcessGroup& pp,
                                                   AdamWConfig opt, uint64_t seed, int m,
                                                   const std::string& trace = "");

}  // namespace llmp
