// ZB-H1: the zero-bubble schedule that keeps 1F1B's peak activation memory.
//
// Qi, Wan, Huang, Lin 2023, "Zero Bubble Pipeline Parallelism" (ICLR 2024), §2 and §3.1, Fig. 3.
// A layer's backward is two computations: B, the gradient w.r.t. its input (what the previous
// stage is waiting for), and W, the gradient w.r.t. its weights (needed only at the optimizer
// step). Run B at once and send it; defer W into time the rank would otherwise spend idle.
//
// Rank r follows 1F1B's order with B in place of the full backward, plus W's:
//   warm-up       min(p-r-1, m) forwards, as in 1F1B;
//   steady state  F, B, and a W once r W's are pending: rank r defers its first r W's, so it
//                 holds at most (p-r-1) + 1 + r = p micro-batches (F done, W not done), the
//                 peak of 1F1B's rank 0;
//   cool-down     B then one W for each remaining backward (the W fills the wait for the next
//                 gradient), then the r deferred W's, which fill the drain at the end.
// With T_F = T_B = T_W the paper gives a bubble of (p-1)(T_F + T_B - T_W) per rank against
// 1F1B's (p-1)(T_F + T_B + T_W), i.e. a third of it.
//
// Glossary: p pipeline stages, m micro-batches, r rank, F forward, B input gradient, W weight
// gradient.
#include <algorithm>

#include "common/pipeline/schedule.h"

namespace llmp {

Schedule zb_h1(int p, int m) {
  Schedule s = empty_schedule("zb_h1", p, m);
  for (int r = 0; r < p; ++r) {
    const int warmup = std::min(p - r - 1, m);
    const int steady = m - warmup;
    int next_w = 0;  // W's run in micro-batch order; B's done = next micro-batch to backward
    for (int i = 0; i < warmup; ++i) append_forward(s, r, i);  // warm-up
    for (int i = 0; i < steady; ++i) {                         // steady state: F, B, (W)
      append_forward(s, r, warmup + i);
      append_backward_input(s, r, i);
      if (i + 1 - next_w > r) append_backward_weight(s, r, next_w++);
    }
    for (int i = steady; i < m; ++i) {  // cool-down: B, W
      append_backward_input(s, r, i);
      append_backward_weight(s, r, next_w++);
    }
    while (next_w < m) append_backward_weight(s, r, next_w++);  // the deferred W's
  }
  return s;
}

}  // namespace llmp
