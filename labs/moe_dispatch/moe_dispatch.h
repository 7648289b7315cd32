// Lab moe_dispatch: the adapter header. The tests call route_top_k() and moe_dispatch_combine()
// and nothing else, so you may organise your code as you like behind them.
//
// The token movement of a mixture-of-experts layer with expert parallelism (GShard, Lepikhin et
// al. 2020, "GShard: Scaling Giant Models with Conditional Computation and Automatic Sharding",
// §2.2 and Algorithm 1; Switch Transformer, Fedus et al. 2021, §2.1-2.2). A router has already
// given every token a probability for each of the E experts; this lab decides which k experts
// each token visits, with what weight (gate) and in which slot of the expert's fixed-size buffer
// (route_top_k), then moves the tokens to the ranks that hold their experts, applies the experts
// and brings the results back (moe_dispatch_combine):
//
//   top-k   e_1..e_k = the k largest p_t,e of token t, in decreasing order (ties: lower index)
//   gates   k = 1: g_1 = p_e1 (Switch);  k ≥ 2: g_j = p_ej / Σ_i p_ei (GShard, renormalised)
//   slots   per token group (S consecutive tokens), for j = 1..k in turn, the tokens of the group
//           in order: assignment (t, j) takes the next free slot of e_j, or is dropped (slot -1)
//           when all cap slots of e_j in this group are taken
//   D[e][g][s] = x[t]          for each kept assignment (t→e, slot s), zero rows elsewhere
//   X = all_to_all(D)          (E,G,cap,C) -> (ep, E/ep, G, cap, C): from every rank
//   Y_e = expert(e, X_e)       for each held expert e, over its ep·G·cap received rows
//   Yd = all_to_all(Y)         back to the tokens' ranks: (E,G,cap,C)
//   out[t] = Σ_j g_j · Yd[e_j][t/S][s_j]     over the kept assignments of t only
//
// Glossary: n tokens on this rank, C channels, E experts, k experts per token (top-k), S tokens
// per token group (one sequence), G = n/S groups, cap expert capacity (slots per expert per
// group; a layer sets it to ⌈k·S·c/E⌉ for a capacity factor c), ep = ep_group.size() ranks of the
// expert-parallel group, r its rank, E/ep experts held per rank: rank r holds
// [r·E/ep, (r+1)·E/ep).
#pragma once

#include <functional>
#include <vector>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// The routing of the n tokens of one rank: which experts, what weights, which slots. Index
/// (t, j) means token t's j-th choice, stored at t·k + j (row-major (n, k)).
struct TopKRouting {
  int n = 0;    ///< tokens
  int E = 0;    ///< experts
  int k = 0;    ///< experts per token
  int S = 0;    ///< tokens per group (groups are tokens [g·S, (g+1)·S))
  int cap = 0;  ///< slots per expert per group
  std::vector<int> expert;  ///< (n, k) e_1..e_k of each token, in decreasing probability
  std::vector<float> gate;  ///< (n, k) g_1..g_k
  std::vector<int> slot;    ///< (n, k) slot in [0, cap) of e_j's buffer for t's group; -1: dropped
};

/// Top-k routing with expert capacity for one rank's tokens (no communication).
///
/// probs: (n, E) host f32, each row a probability vector (the router's softmax, already taken);
/// not modified. k: experts per token. group_tokens: S, tokens per group. capacity: cap.
/// Returns a TopKRouting with n, E, k, S = group_tokens, cap = capacity and, for each token t:
///   expert: the k experts of largest p_t,e in decreasing order of p; among equal
///           probabilities the lower expert index comes first;
///   gate:   k = 1: g_1 = p_t,e1 (not 1: Switch Transformer's gate);
///           k ≥ 2: g_j = p_t,ej / Σ_{i=1..k} p_t,ei (GShard's renormalised gates; Σ_j g_j = 1);
///   slot:   GShard's order, group by group (token group g = tokens [g·S, (g+1)·S)): every
///           expert's count starts at 0 in each group; for j = 1, then 2, ..., k, and within j for
///           the group's tokens in order, assignment (t, j) gets slot = count[e_j]++ while
///           count[e_j] < cap, else -1 (dropped). So all first choices of a group are placed
///           before any second choice: a second choice never takes a slot a first choice of the
///           same group would have got.
/// Throws std::invalid_argument, one line naming the values, when: probs is not a 2-D host f32
/// tensor; k < 1 or k > E ("top_k=3 exceeds experts=2"); group_tokens < 1; capacity < 1
/// ("capacity 0 must be >= 1"); n is not divisible by group_tokens ("10 tokens are not groups
/// of 4").
TopKRouting route_top_k(const Tensor& probs, int k, int group_tokens, int capacity);

/// An expert's function on a block of rows: given the global expert index e and rows (M, C), host
/// f32, returns a new (M, C) tensor, row i being expert e applied to row i (each row on its own).
using ExpertFn = std::function<Tensor(int e, const Tensor& rows)>;

/// Dispatch, experts, combine: the forward of a mixture-of-experts layer's token movement with
/// expert parallelism over `ep_group` (ep ranks; rank r holds experts [r·E/ep, (r+1)·E/ep)).
///
/// x: (n, C) host f32, this rank's tokens (n = routing.n; every rank holds its own tokens).
/// routing: this rank's routing of them (route_top_k's result, or built by hand: only assignments
/// with slot ≥ 0 are used). Returns out (n, C), a new tensor:
///   out[t] = Σ_{j: slot ≥ 0} gate[t,j] · expert(e_j, x[t])      (0 for a token with none kept)
/// computed as
///   1. dispatch buffer D (E, G, cap, C), zeros, then D[e_j][t/S][slot] = x[t] for each kept
///      assignment (t, j). Ordered by expert, so chunk q of the first dimension split in ep equal
///      chunks (experts [q·E/ep, (q+1)·E/ep)) is what rank q needs;
///   2. X = ep_group.all_to_all(D): X (ep, E/ep, G, cap, C), X[i][l] = rank i's rows for held
///      expert e = r·E/ep + l;
///   3. for each held expert e (l = 0 .. E/ep-1), ONE call expert(e, X_e) with X_e the
///      (ep·G·cap, C) rows it received, in (source rank i, group g, slot s) order, empty slots
///      (zero rows) included: the static shape every rank agrees on without communicating;
///      Y (ep, E/ep, G, cap, C) holds the results where X held their inputs;
///   4. Yd = ep_group.all_to_all(Y): Yd (E, G, cap, C) on this rank, Yd[e][g][s] = expert e's
///      output for the row this rank put at D[e][g][s];
///   5. combine: out[t] = Σ_{j: slot ≥ 0} gate[t,j] · Yd[e_j][t/S][slot[t,j]]; a dropped
///      assignment adds nothing (in a transformer the residual connection carries the token).
/// expert is never called for an expert this rank does not hold; an expert that returns another
/// shape than its rows' ends every rank with LLMP_CHECK naming both. Forward only, f32.
///
/// Collective: every rank of ep_group calls it with the same E, k, S, cap, C and n (so G is the
/// same), each with its own tokens and routing. On one rank both all_to_alls are copies.
/// Traffic: exactly two all_to_alls of E·G·cap·C floats, each sending (ep-1)/ep·4·E·G·cap·C
/// bytes per rank (ep_group.stats()), 0 on one rank; no other communication.
/// Throws std::invalid_argument, one line naming the values, before any communication, when:
/// E is not divisible by ep ("experts=6 are not divisible by ep=4"); x is not a 2-D host f32
/// tensor with routing.n rows; routing's vectors are not (n, k), an expert is outside [0, E) or a
/// slot outside [-1, cap), or its E, k, S, cap do not route (as route_top_k's checks).
Tensor moe_dispatch_combine(ProcessGroup& ep_group, const Tensor& x, const TopKRouting& routing,
                            const ExpertFn& expert);

}  // namespace llmp
