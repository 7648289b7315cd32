// The router of a mixture-of-experts layer: which k of the E experts each token visits, with what
// weight (gate), and in which slot of the expert's fixed-size buffer, and the load-balancing loss
// that keeps the experts evenly used. Pure functions of the router's logits, no communication.
//
//   probs  = softmax(logits)                       (n,E)   logits = ln_2(x) @ W_router (C,E)
//   top-k  e_1..e_k = the k largest probs of a token, in decreasing order (ties: lower index)
//   gates  k = 1: g_1 = p_{e_1}                     Switch Transformer (Fedus et al. 2021, §2.1)
//          k ≥ 2: g_j = p_{e_j} / Σ_i p_{e_i}       GShard (Lepikhin et al. 2020, Algorithm 1)
//   capacity  cap = ⌈k · S · c / E⌉ slots per expert per token group of S tokens (GShard §2.2)
//   slots  for choice j = 1..k, then for the tokens of a group in order: the next free slot of
//          e_j, or dropped when all cap are taken (GShard: first choices before second choices;
//          GShard's random dispatch of the second expert is left out, so routing is deterministic)
//   aux    per group: E · Σ_e f_e · P_e, f_e = (1/S)·#{tokens whose e_1 = e}, P_e = (1/S)·Σ p_e
//          (Switch Transformer, eq. 4-6): 1 when perfectly balanced, E when all go to one expert
//   z      per token: (log Σ_e exp z_e)², the router z-loss of ST-MoE (Zoph et al. 2022, §3.1,
//          eq. 5): it keeps the logits small, so the softmax stays in fp32's (and bf16's) range
//
// A dropped assignment contributes nothing to the layer's output: the residual carries the token.
// A token group here is ONE SEQUENCE (S = T): every way of splitting the global batch over ranks
// keeps whole sequences together, so the single-rank baseline and every expert-parallel run form
// the same groups and drop exactly the same tokens.
//
// Glossary: n tokens, E experts, k experts per token, S tokens per group, G groups (n = G·S),
// c capacity factor, cap slots per expert per group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmp {

/// cap = ⌈k·S·c/E⌉ (at least 1). Throws std::invalid_argument naming the values when k > E,
/// k < 1, E < 1, S < 1 or c ≤ 0.
int expert_capacity(int k, int group_tokens, double capacity_factor, int E);

/// "" when (E, k, c) route, else one line naming the values ("top_k=3 exceeds experts=2",
/// "capacity factor 0 must be > 0"): what the stages print for bad flags.
std::string routing_error(int E, int k, double capacity_factor);

/// The routing of n tokens (G groups of S).
struct Routing {
  int n = 0, E = 0, k = 0, S = 0, cap = 0;
  int groups() const { return S > 0 ? n / S : 0; }
  std::vector<float> probs;      ///< (n,E) softmax of the logits
  std::vector<int> expert;       ///< (n,k) e_1..e_k
  std::vector<float> gate;       ///< (n,k) g_1..g_k
  std::vector<int> slot;         ///< (n,k) slot in [0, cap) of the expert's group buffer, -1: dropped
  std::vector<int64_t> routed;   ///< (E) assignments chosen for e (before capacity)
  std::vector<int64_t> kept;     ///< (E) assignments that got a slot
  double aux_sum = 0;            ///< Σ over the G groups of E·Σ_e f_e·P_e
  std::vector<float> lse;        ///< (n) log Σ_e exp z_e of each token
  double z_sum = 0;              ///< Σ over the n tokens of lse²
  /// Row of the (E, G, cap) dispatch buffer that assignment (t, j) fills; -1 when dropped.
  int64_t buffer_row(int t, int j) const {
    const int s = slot[t * k + j];
    return s < 0 ? -1 : (static_cast<int64_t>(expert[t * k + j]) * groups() + t / S) * cap + s;
  }
};

/// Routes n tokens of groups of S (n divisible by S) with logits (n,E). Throws as
/// expert_capacity does, and when S does not divide n.
Routing route(const float* logits, int n, int E, int k, int S, double capacity_factor);

/// The router's backward: dlogits (n,E) OVERWRITTEN with dL/dlogits, given dgate (n,k) = dL/dg
/// (0 for dropped assignments), the load-balancing loss's weight `aux_weight` per group (the
/// loss holds aux_weight · Σ_g aux_g; its gradient flows through P_e only, f_e is a count) and
/// the z-loss's weight `z_weight` per token (the loss holds z_weight · Σ_t lse_t²).
///   gates:  k = 1: dp_{e_1} = dg_1;  k ≥ 2: dp_{e_i} = (dg_i − Σ_j dg_j g_j) / Σ_j p_{e_j}
///   aux:    dp_{t,e} += aux_weight · E · f_e / S          (f_e of token t's group)
///   softmax dlogits_{t,e} = p_{t,e} · (dp_{t,e} − Σ_e' dp_{t,e'} p_{t,e'})
///   z       dlogits_{t,e} += z_weight · 2·lse_t · p_{t,e}          (d lse / dz_e = p_e)
void route_backward(const Routing& r, const float* dgate, double aux_weight, float* dlogits,
                    double z_weight = 0);

}  // namespace llmp
