// The two fill-drain schedules: naive (one micro-batch in the pipe at a time) and GPipe.
//
// naive: Rank r runs F0 B0 F1 B1 ...; rank 0 cannot start F1 before B0 comes back, so the
//   pipeline holds one micro-batch and p-1 of every p slots are idle: bubble (p-1)/p.
// GPipe (Huang et al. 2019, "GPipe: Efficient Training of Giant Neural Networks using Pipeline
//   Parallelism", §2.2 and Fig. 2c): every rank runs all m forwards, then all m backwards in
//   reverse order (the last micro-batch forward is the first whose gradient is ready). The pipe
//   fills for p-1 slots and drains for p-1 slots: bubble (p-1)/(m+p-1) of the step with F = B,
//   but every rank keeps the activations of all m micro-batches.
//
// Glossary: p pipeline stages, m micro-batches, F forward, B backward.
#include "common/pipeline/schedule.h"

namespace llmp {

Schedule naive(int p, int m) {
  Schedule s = empty_schedule("naive", p, m);
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < m; ++i) {
      append_forward(s, r, i);
      append_backward(s, r, i);
    }
  }
  return s;
}

Schedule gpipe(int p, int m) {
  Schedule s = empty_schedule("gpipe", p, m);
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < m; ++i) append_forward(s, r, i);       // fill: F0 .. F(m-1)
    for (int i = m - 1; i >= 0; --i) append_backward(s, r, i);  // drain: B(m-1) .. B0
  }
  return s;
}

}  // namespace llmp
