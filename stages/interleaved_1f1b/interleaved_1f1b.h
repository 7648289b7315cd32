// Interleaved 1F1B: v model chunks per rank shrink the bubble v-fold.
//
// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM" (SC'21), §2.2.2 and Fig. 4 (Megatron's interleaved schedule). The L layers are
// cut into p·v slices ("virtual stages"); rank r holds v of them, not adjacent: chunk c of rank
// r is virtual stage s = c·p + r. With p = 2, v = 2, L = 8: rank 0 holds layers 0-1 and 4-5,
// rank 1 layers 2-3 and 6-7, and a micro-batch visits rank 0, 1, 0, 1 (common/pipeline/
// gpt_partition.h). Each chunk-forward costs 1/v of a stage-forward, so the fill and the drain
// take (p-1)/v stage-times instead of p-1:
//
//   bubble time / ideal time = (1/v)·(p-1)/m       bubble fraction = (p-1)/(v·m + p-1)
//   point-to-point messages per micro-batch: v times 1F1B's (every chunk boundary is a hop)
//
// Micro-batches enter in groups of p (Megatron requires m % p == 0). The warm-up is longer than
// 1F1B's — (p-r-1)·2 + (v-1)·p chunk-forwards — so rank 0 holds up to
// (p-1)·2 + (v-1)·p + 1 chunk activations, each 1/v of a micro-batch's for the rank's layers:
// about p + (p-2)/v micro-batches' worth, a little more than 1F1B's p.
//
// The schedule: common/pipeline/schedule_interleaved.cc; the executor: common/pipeline/executor.h.
//
// Glossary: p pipeline stages (ranks), m micro-batches, v chunks per rank, s virtual stage,
// L layers, F forward, B backward.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"
#include "common/pipeline/pipeline_strategy.h"

namespace llmp {

/// Bubble fraction of interleaved 1F1B with unit forward and backward per stage:
/// (p-1)/(v·m + p-1), i.e. bubble time / ideal time = (p-1)/(v·m).
double interleaved_bubble_fraction(int p, int m, int v);

/// Chunk activations rank r holds at its peak: min((p-r-1)·2 + (v-1)·p + 1, m·v) (m·v when m = p).
int interleaved_peak_in_flight(int p, int m, int v, int r);

/// Interleaved 1F1B over the ranks of `pp` (p = pp.size()), m micro-batches, v chunks. Collective.
std::unique_ptr<PipelineStrategy> make_interleaved_1f1b(const GPT& model, ProcessGroup& pp,
                                                        AdamWConfig opt, uint64_t seed, int m,
                                                        int v, const std::string& trace = "");

}  // namespace llmp
