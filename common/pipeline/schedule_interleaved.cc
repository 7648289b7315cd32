// Interleaved 1F1B: each rank holds v model chunks, so the pipe fills and drains v times faster.
//
// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM", §2.2.2 and Fig. 4; Megatron's forward_backward_pipelining_with_interleaving.
// The model is cut into p·v slices; rank r holds virtual stages r, r+p, ..., r+(v-1)p (chunk c
// is virtual stage c·p + r). A chunk costs 1/v of a whole stage, so the fill and drain take
// (p-1)/v stage-times instead of p-1: bubble time / ideal time = (1/v)·(p-1)/m, at the price of
// v times more point-to-point messages.
//
// Order. Number the m·v chunk-forwards of a rank k = 0, 1, ...; they go in groups of p·v: p
// micro-batches through chunk 0, the same p through chunk 1, ..., then the next p micro-batches:
//   group = k / (p·v),  chunk = (k mod p·v) / p,  micro-batch = group·p + (k mod p).
// The k-th chunk-backward uses the same micro-batch with the chunks reversed (v-1-chunk). This
// is why Megatron requires m % p == 0: micro-batches are taken p at a time.
// Rank r: warm-up of min((p-r-1)·2 + (v-1)·p, m·v) chunk-forwards (all m·v when m == p, which
// degenerates to GPipe order), steady state one chunk-forward then one chunk-backward, cool-down.
//
// Example, p = 2, m = 4, v = 2, rank 0 (upper case chunk 0, lower case chunk 1):
//   warm-up F0 F1 f0 f1; steady F2 b0 F3 b1 f2 B0 f3 B1; cool-down b2 b3 B2 B3.
//
// Glossary: p pipeline stages, m micro-batches, v model chunks per rank, k chunk-op index.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/pipeline/schedule.h"

namespace llmp {

namespace {
// The k-th chunk-forward (forward = true) or chunk-backward of any rank: (micro-batch, chunk).
Action kth(int k, int p, int v, bool forward) {
  const int group = k / (p * v);
  const int in_group = k % (p * v);
  int chunk = in_group / p;
  if (!forward) chunk = v - 1 - chunk;
  return {forward ? Op::kForward : Op::kBackward, group * p + in_group % p, chunk};
}
}  // namespace

Schedule interleaved_1f1b(int p, int m, int v) {
  if (v == 1) {
    Schedule s = one_f_one_b(p, m);
    s.name = "interleaved_1f1b";
    return s;
  }
  Schedule s = empty_schedule("interleaved_1f1b", p, m, v);
  if (m % p != 0) {
    throw std::invalid_argument("number of micro-batches m=" + std::to_string(m) +
                                " is not divisible by pipeline stages p=" + std::to_string(p) +
                                "; interleaved_1f1b needs m % p == 0");
  }
  const int total = m * v;
  for (int r = 0; r < p; ++r) {
    const int warmup = (m == p) ? total : std::min((p - r - 1) * 2 + (v - 1) * p, total);
    const int steady = total - warmup;
    auto forward = [&](int k) { Action a = kth(k, p, v, true); append_forward(s, r, a.microbatch, a.chunk); };
    auto backward = [&](int k) { Action a = kth(k, p, v, false); append_backward(s, r, a.microbatch, a.chunk); };
    for (int k = 0; k < warmup; ++k) forward(k);  // warm-up
    for (int i = 0; i < steady; ++i) {            // steady state: 1F, 1B
      forward(warmup + i);
      backward(i);
    }
    for (int k = steady; k < total; ++k) backward(k);  // cool-down
  }
  return s;
}

}  // namespace llmp
