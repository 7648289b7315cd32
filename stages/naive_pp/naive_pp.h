// Naive pipeline parallelism: cut the layers over p ranks and pass the whole batch through.
//
// The starting point of Huang et al. 2019 ("GPipe", §2.2, Fig. 2b) and of every pipeline
// schedule after it. The L layers are cut into p contiguous stages, one per rank; the global
// batch goes through as ONE micro-batch (m = 1):
//
//   rank 0:    F ........... B           recv_forward/send_forward between neighbours,
//   rank 1:    . F ....... B .           recv_backward/send_backward on the way back
//   rank p-1:  ...... F B ......
//
// At any moment exactly one rank computes: the others wait for its activations or gradients.
//
//   bubble fraction = (p-1)/p        (F = B = one slot: each rank is busy 2 of 2p slots)
//   activations per rank: the whole batch's, for its L/p layers
//   parameters, gradients, optimizer state per rank: its stage's only (≈ 1/p of the model)
//
// So the model's memory is split p ways, but the time is not: p ranks train no faster than one.
// GPipe (stages/gpipe) cuts the batch into m micro-batches so the stages overlap; 1F1B
// (stages/1f1b) also bounds the activations. The schedule is data (common/pipeline/
// schedule_gpipe.cc, `naive`), run by the executor (common/pipeline/executor.h).
//
// Glossary: p pipeline stages (ranks), m micro-batches (here 1), L layers, F forward, B backward.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"
#include "common/pipeline/pipeline_strategy.h"

namespace llmp {

/// Bubble fraction of the naive pipeline (one micro-batch), unit forward and backward: (p-1)/p.
double naive_pp_bubble_fraction(int p);

/// The naive pipeline over the ranks of `pp` (p = pp.size()), the whole batch at once. Collective.
std::unique_ptr<PipelineStrategy> make_naive_pp(const GPT& model, ProcessGroup& pp,
                                                AdamWConfig opt, uint64_t seed,
                                                const std::string& trace = "");

}  // namespace llmp
