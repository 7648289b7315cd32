// Chimera: bidirectional pipelines, so that each direction fills the other's bubbles.
//
// Li & Hoefler 2021, "Chimera: Efficiently Training Large-Scale Neural Networks with
// Bidirectional Pipelines" (SC'21), §3. The model is cut into p stages, as for 1F1B, and every
// rank holds TWO of them: stage r of the "down" pipeline and stage p-1-r of the "up" pipeline.
// Half of each unit of p micro-batches goes down (rank 0 -> p-1), half goes up (rank p-1 -> 0),
// so both ends of the pipe start working at once:
//
//   p = 4, m = 4, one slot per F or B (upper case: down micro-batches 0, 1; lower: up 2, 3):
//     rank 0:  F0 F1 .  f2 b2 f3 b3 B0 .  B1
//     rank 1:  .  F0 f2 F1 f3 b2 B0 b3 B1 .
//     rank 2:  .  f2 F0 f3 F1 B0 b2 B1 b3 .
//     rank 3:  f2 f3 .  F0 B0 F1 B1 b2 .  b3
//
//   bubble fraction = (p-2)/(2m+p-2)     (1F1B: (p-1)/(m+p-1); p = 4, m = 4: 0.2 against 0.43)
//
// The price: each stage's weights live on two ranks (2× parameters, gradients and optimizer
// state per rank against 1F1B), and the two replicas' gradients are all-reduced before the
// synchronous step (4Ψ_r bytes per rank). Being synchronous, Chimera trains exactly the
// baseline's model. The schedule is data: common/pipeline/schedule_chimera.cc; the executor and
// strategy are the other pipeline stages' (common/pipeline/pipeline_strategy.h).
//
// Glossary: p pipeline stages (ranks, even), m micro-batches (a multiple of p), F forward,
// B backward, Ψ_r parameters held by a rank.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"
#include "common/pipeline/pipeline_strategy.h"

namespace llmp {

/// Chimera's bubble fraction with unit forward and backward (Li & Hoefler 2021, Table 2):
/// (p-2)/(2m+p-2).
double chimera_bubble_fraction(int p, int m);

/// The logical clock Chimera's bubble is stated for: F = B = 1 (the paper's one slot each).
LogicalCosts chimera_clock_costs();

/// Chimera over the ranks of `pp` (p = pp.size(), even) with m micro-batches (m % p == 0).
/// Collective.
std::unique_ptr<PipelineStrategy> make_chimera(const GPT& model, ProcessGroup& pp,
                                               AdamWConfig opt, uint64_t seed, int m,
                                               const std::string& trace = "");

}  // namespace llmp
