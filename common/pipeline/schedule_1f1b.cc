// 1F1B, also called PipeDream-Flush: the schedule Megatron-LM runs by default.
//
// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM", §2.2.1 and Fig. 3 (top); Megatron's forward_backward_pipelining_without_
// interleaving. Rank r runs three phases:
//   warm-up       min(p-r-1, m) forwards: just enough to fill the pipe below it;
//   steady state  one forward, then one backward (the oldest micro-batch in flight);
//   cool-down     the backwards of the micro-batches still in flight.
// Same bubble as GPipe, (p-1)/(m+p-1) of the step with F = B, because the pipe still fills and
// drains once; but rank r never holds more than min(p-r, m) micro-batches of activations
// instead of m, so m can grow (shrinking the bubble) without growing memory.
//
// Example, p = 4, m = 8, rank 1: warm-up F0 F1; steady F2 B0 F3 B1 ... F7 B5; cool-down B6 B7.
//
// Glossary: p pipeline stages, m micro-batches, r rank, F forward, B backward.
#include <algorithm>

#include "common/pipeline/schedule.h"

namespace llmp {

Schedule one_f_one_b(int p, int m) {
  Schedule s = empty_schedule("1f1b", p, m);
  for (int r = 0; r < p; ++r) {
    const int warmup = std::min(p - r - 1, m);
    const int steady = m - warmup;
    for (int i = 0; i < warmup; ++i) append_forward(s, r, i);  // warm-up
    for (int i = 0; i < steady; ++i) {                         // steady state: 1F, 1B
      append_forward(s, r, warmup + i);
      append_backward(s, r, i);
    }
    for (int i = steady; i < m; ++i) append_backward(s, r, i);  // cool-down
  }
  return s;
}

}  // namespace llmp
