// Chimera: two pipelines in opposite directions over the same p ranks, each filling the other's
// bubbles.
//
// Li & Hoefler 2021, "Chimera: Efficiently Training Large-Scale Neural Networks with
// Bidirectional Pipelines", §3. The model is cut into p stages as in 1F1B, but every rank holds
// two of them: stage r of the "down" pipeline (chunk 0) and stage p-1-r of the "up" pipeline
// (chunk 1). Rank 0 holds the first stage of one pipeline and the last of the other, so both
// pipelines start at once, at opposite ends. p = 4:
//
//            rank 0   rank 1   rank 2   rank 3
//   down:    stage 0  stage 1  stage 2  stage 3     micro-batches 0, 1 flow rank 0 -> 3
//   up:      stage 3  stage 2  stage 1  stage 0     micro-batches 2, 3 flow rank 3 -> 0
//
// Each stage's weights are held twice (ranks s and p-1-s); the two replicas' gradients are
// all-reduced before the synchronous optimizer step (pipeline_strategy.h), so Chimera computes
// exactly the gradient of 1F1B: it is synchronous, and matches the baseline.
//
// Micro-batches come in units of p (the paper's "basic unit", N = D): in unit u, micro-batches
// u·p .. u·p+p/2-1 go down and u·p+p/2 .. (u+1)·p-1 go up. With m > p the units are
// concatenated (§3.5, "direct concatenation"); the list schedule below fills the junctions.
//
// Order on each rank: a list schedule at the paper's unit costs (F = B = 1 slot). Every rank
// starts each op as early as its inputs allow; when several are ready it takes
//   1. a backward before a forward (the backward frees activations and feeds the rank before),
//   2. among forwards, the one at the deeper stage (further along its pipeline: its backward
//      comes back sooner; at a tie the lower micro-batch),
//   3. among backwards, the lower stage, then the lower micro-batch.
// This reproduces the paper's Fig. 3 for p = 4, m = 4: every rank idles p-2 = 2 slots, so the
// makespan is 2m + p - 2 and the bubble fraction (p-2)/(2m+p-2) (1F1B: (p-1)/(m+p-1)); for
// m = k·p the same holds (schedule_chimera_test checks p = 2..8, m = p..4p with the simulator).
//
// Glossary: p pipeline stages (ranks, even), m micro-batches, F forward, B backward, slot one
// unit of compute (F or B).
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/pipeline/schedule.h"

namespace llmp {

namespace {

struct Op1 {  // one compute op of the list schedule: F or B of micro-batch mb at stage s
  bool backward = false;
  int mb = 0, stage = 0;
  int rank = 0;
  double end = -1;  // < 0: not run yet
};

}  // namespace

Schedule chimera(int p, int m) {
  Schedule s = empty_schedule("chimera", p, m, 2);
  if (p % 2 != 0 || m % p != 0) {
    throw std::invalid_argument("chimera needs an even p and m % p == 0 (units of p micro-batches, "
                                "half per direction); got m=" + std::to_string(m) +
                                ", p=" + std::to_string(p));
  }
  s.pipelines = 2;
  s.microbatch_pipeline.resize(m);
  for (int i = 0; i < m; ++i) s.microbatch_pipeline[i] = (i % p) < p / 2 ? 0 : 1;
  const Placement pl = s.placement();

  // ops[(mb·p + stage)·2 + backward]
  std::vector<Op1> ops(static_cast<size_t>(m) * p * 2);
  auto at = [&](int mb, int stage, bool bwd) -> Op1& { return ops[(mb * p + stage) * 2 + bwd]; };
  for (int i = 0; i < m; ++i)
    for (int st = 0; st < p; ++st)
      for (int b = 0; b < 2; ++b) {
        Op1& o = at(i, st, b);
        o.backward = b, o.mb = i, o.stage = st;
        o.rank = pl.where(st, s.microbatch_pipeline[i]).rank;
      }
  // When the input of `o` is ready (its producer's end), or -1 when the producer has not run.
  auto ready_at = [&](const Op1& o) -> double {
    if (!o.backward) return o.stage == 0 ? 0.0 : at(o.mb, o.stage - 1, false).end;
    return o.stage == p - 1 ? at(o.mb, o.stage, false).end : at(o.mb, o.stage + 1, true).end;
  };
  // Rank r's preference among ops ready at the same time: smaller is first (rules 1-3 above).
  auto rank_key = [&](const Op1& o) {
    return o.backward ? std::make_tuple(0, o.stage, o.mb) : std::make_tuple(1, -o.stage, o.mb);
  };

  std::vector<double> free_at(p, 0.0);
  std::vector<std::vector<const Op1*>> order(p);
  for (size_t left = ops.size(); left > 0; --left) {
    // The op that can start earliest anywhere (ties: the lower rank), by its rank's preference.
    Op1* best = nullptr;
    double best_start = std::numeric_limits<double>::infinity();
    for (Op1& o : ops) {
      if (o.end >= 0) continue;
      const double r = ready_at(o);
      if (r < 0) continue;
      const double start = std::max(r, free_at[o.rank]);
      const bool earlier = start < best_start ||
                           (start == best_start && (o.rank < best->rank ||
                                                    (o.rank == best->rank && rank_key(o) < rank_key(*best))));
      if (earlier) best = &o, best_start = start;
    }
    Op1& o = *best;
    o.end = best_start + 1.0;  // unit costs: F = B = 1 slot
    free_at[o.rank] = o.end;
    order[o.rank].push_back(&o);
  }
  // Each rank's compute ops in the order it runs them, with the recvs and sends around them.
  for (int r = 0; r < p; ++r) {
    for (const Op1* o : order[r]) {
      const int chunk = s.microbatch_pipeline[o->mb];  // chunk c is pipeline c
      if (o->backward)
        append_backward(s, r, o->mb, chunk);
      else
        append_forward(s, r, o->mb, chunk);
    }
  }
  return s;
}

}  // namespace llmp
