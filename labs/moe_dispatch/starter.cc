// Lab moe_dispatch: your implementation. Read README.md first, then moe_dispatch.h (the full
// spec); run the tests with
//     bazel test //labs/moe_dispatch:student_test
// They fail until route_top_k() and moe_dispatch_combine() below are done. Add helpers here (or
// in new files, listed in BUILD's `starter` target) as you like; the tests only call these two.
//
// What you may use: ProcessGroup::all_to_all (common/comm/process_group.h: input and output hold
// ep equal chunks along their first dimension; chunk j of the input goes to rank j, chunk i of
// the output came from rank i), Tensor::empty / zeros / f32 / dim, std::stable_sort,
// std::copy_n. What you may not: common/nn/moe_routing.h or common/nn/moe.h (the project's MoE
// layer: writing that logic is the lab), any other communication (the tests count the bytes:
// two all_to_alls, nothing else), or MPI directly.
//
// Glossary: n tokens, C channels, E experts, k experts per token, S tokens per group, G = n/S
// groups, cap slots per expert per group, ep = ep_group.size(), r = ep_group.rank(), El = E/ep.
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "labs/moe_dispatch/moe_dispatch.h"

namespace llmp {

// TODO(lab moe_dispatch): top-k routing with expert capacity (spec: moe_dispatch.h). In short,
// with probs (n, E):
//   - the errors first: std::invalid_argument, one line naming the values, for k < 1, k > E,
//     group_tokens < 1, capacity < 1, n not divisible by group_tokens;
//   - for each token: its k experts in decreasing probability (equal probabilities: lower
//     index first; std::stable_sort of 0..E-1 does it), and their gates: k = 1: p_e1;
//     k ≥ 2: p_ej / (p_e1 + ... + p_ek);
//   - the slots, group by group (every count back to 0 at a group's start): for j = 0..k-1, for
//     the group's tokens in order, the next free slot of e_j, or -1 when cap are taken.
TopKRouting route_top_k(const Tensor& probs, int k, int group_tokens, int capacity) {
  TopKRouting r;
  r.n = probs.ndim() == 2 ? static_cast<int>(probs.dim(0)) : 0;
  r.E = probs.ndim() == 2 ? static_cast<int>(probs.dim(1)) : 0;
  r.k = k, r.S = group_tokens, r.cap = capacity;
  // TODO(lab moe_dispatch): remove the lines below and implement the routing above. Until then
  // every assignment goes to expert 0 with gate 0 and is dropped: the right shapes, wrong values.
  const size_t nk = k > 0 ? static_cast<size_t>(r.n) * k : 0;
  r.expert.assign(nk, 0);
  r.gate.assign(nk, 0.0f);
  r.slot.assign(nk, -1);
  return r;
}

// TODO(lab moe_dispatch): dispatch, experts, combine (spec: moe_dispatch.h). In short, with
// x (n, C) and El = E/ep:
//   - the errors first, before any communication (every rank must throw, or none): E not
//     divisible by ep, x not (n, C) host f32, routing vectors not (n, k), and route_top_k's;
//   - D (E, G, cap, C) zeros; D[e_j][t/S][slot] = x[t] for each assignment with slot ≥ 0;
//   - X (ep, El, G, cap, C) = all_to_all(D): chunk q of D (experts [q·El, (q+1)·El)) to rank q;
//   - for l = 0..El-1: gather X[i][l] for i = 0..ep-1 into one (ep·G·cap, C) tensor, call
//     expert(r·El + l, rows) ONCE, put its rows back at Y[i][l];
//   - Yd (E, G, cap, C) = all_to_all(Y): the results back on the tokens' rank;
//   - out[t] = Σ_{j: slot ≥ 0} gate[t,j] · Yd[e_j][t/S][slot[t,j]], zeros otherwise.
Tensor moe_dispatch_combine(ProcessGroup& ep_group, const Tensor& x, const TopKRouting& routing,
                            const ExpertFn& expert) {
  (void)ep_group, (void)routing, (void)expert;  // TODO(lab moe_dispatch): remove, implement.
  // Until then: zeros, no communication, no expert called.
  return Tensor::zeros(x.shape(), DType::kF32, MemCategory::kActivations);
}

}  // namespace llmp
