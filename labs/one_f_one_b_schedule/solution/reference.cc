// Lab one_f_one_b_schedule, reference solution (for instructors; students start from ../starter.cc).
//
// 1F1B / PipeDream-Flush (Narayanan et al. 2021 §2.2.1). Rank r first runs w_r = min(p-r-1, m)
// forwards, exactly enough that when its first backward becomes possible (the last rank turns
// micro-batch 0 round after p-r-1 more forwards downstream) it has one forward more in hand; then
// it alternates one forward with one backward of the oldest micro-batch in flight, so it never
// holds more than w_r + 1 = min(p-r, m) micro-batches; the cool-down drains the last w_r.
// The pipe still fills and drains once: makespan (m+p-1)(F+B), bubble (p-1)/(m+p-1), as GPipe.
//
// The messages are written out here to show them; append_forward / append_backward
// (common/pipeline/schedule.h) push the same three actions.
//
// Glossary: p pipeline stages, r rank, m micro-batches, i micro-batch, w_r warm-up forwards.
#include <algorithm>

#include "labs/one_f_one_b_schedule/one_f_one_b_schedule.h"

namespace llmp {

Schedule student_one_f_one_b(int p, int m) {
  Schedule s = empty_schedule("1f1b (lab reference)", p, m);  // throws for p < 1 or m < 1
  for (int r = 0; r < p; ++r) {
    std::vector<Action>& a = s.ranks[r];
    const bool first = r == 0, last = r == p - 1;
    auto forward = [&](int i) {  // input activations from r-1, F, output activations to r+1
      if (!first) a.push_back({Op::kRecvForward, i});
      a.push_back({Op::kForward, i});
      if (!last) a.push_back({Op::kSendForward, i});
    };
    auto backward = [&](int i) {  // output gradient from r+1, B, input gradient to r-1
      if (!last) a.push_back({Op::kRecvBackward, i});
      a.push_back({Op::kBackward, i});
      if (!first) a.push_back({Op::kSendBackward, i});
    };

    const int warmup = std::min(p - r - 1, m);
    for (int i = 0; i < warmup; ++i) forward(i);  // warm-up: F0 .. F(w-1)
    for (int j = 0; j < m - warmup; ++j) {        // steady state: F(w+j), then B(j)
      forward(warmup + j);
      backward(j);
    }
    for (int i = m - warmup; i < m; ++i) backward(i);  // cool-down: B(m-w) .. B(m-1)
  }
  return s;
}

}  // namespace llmp
