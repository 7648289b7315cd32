// Lab moe_dispatch, reference solution (for instructors; students start from ../starter.cc).
//
// GShard's routing and dispatch (Lepikhin et al. 2020, §2.2, Algorithm 1): top-k by a stable sort,
// slots handed out group by group, all first choices before any second choice; then the
// (E, G, cap, C) dispatch buffer, ordered by expert so that chunk q of the all_to_all is rank q's
// experts, one call per held expert over its ep·G·cap rows, the all_to_all back, and the combine.
//
// Glossary: n tokens, C channels, E experts, k per token, S per group, G = n/S, cap slots per
// expert per group, ep ranks, El = E/ep experts held, M = ep·G·cap rows per held expert.
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common/runtime/check.h"
#include "labs/moe_dispatch/moe_dispatch.h"

namespace llmp {

namespace {

void check_routes(int n, int E, int k, int S, int cap) {
  auto bad = [](const std::string& m) { throw std::invalid_argument(m); };
  if (k < 1 || k > E)
    bad("top_k=" + std::to_string(k) + (k < 1 ? " must be >= 1" : " exceeds experts=" +
                                                                       std::to_string(E)));
  if (S < 1) bad("token group of " + std::to_string(S) + " tokens must be >= 1");
  if (cap < 1) bad("capacity " + std::to_string(cap) + " must be >= 1");
  if (n % S != 0)
    bad(std::to_string(n) + " tokens are not groups of " + std::to_string(S));
}

}  // namespace

TopKRouting route_top_k(const Tensor& probs, int k, int group_tokens, int capacity) {
  if (probs.ndim() != 2 || probs.dtype() != DType::kF32 || probs.device() != Device::kCPU)
    throw std::invalid_argument("route_top_k: probs must be (n, E) host f32, got " +
                                probs.describe());
  TopKRouting r;
  r.n = probs.dim(0), r.E = probs.dim(1), r.k = k, r.S = group_tokens, r.cap = capacity;
  check_routes(r.n, r.E, k, r.S, r.cap);
  r.expert.resize(r.n * k), r.gate.resize(r.n * k), r.slot.assign(r.n * k, -1);
  std::vector<int> order(r.E);
  for (int t = 0; t < r.n; ++t) {
    const float* p = probs.f32() + static_cast<int64_t>(t) * r.E;
    std::iota(order.begin(), order.end(), 0);  // stable: equal p keep the lower index first
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    float top = 0;
    for (int j = 0; j < k; ++j) top += p[order[j]];
    for (int j = 0; j < k; ++j)
      r.expert[t * k + j] = order[j], r.gate[t * k + j] = k == 1 ? p[order[j]] : p[order[j]] / top;
  }
  std::vector<int> used(r.E);
  for (int g = 0; g < r.n / r.S; ++g) {  // each group's buffers start empty
    std::fill(used.begin(), used.end(), 0);
    for (int j = 0; j < k; ++j)  // GShard: all first choices, then all second choices, ...
      for (int t = g * r.S; t < (g + 1) * r.S; ++t)
        if (used[r.expert[t * k + j]] < r.cap) r.slot[t * k + j] = used[r.expert[t * k + j]]++;
  }
  return r;
}

Tensor moe_dispatch_combine(ProcessGroup& ep_group, const Tensor& x, const TopKRouting& rt,
                            const ExpertFn& expert) {
  const int ep = ep_group.size(), r = ep_group.rank(), E = rt.E, k = rt.k, n = rt.n;
  if (E < 1 || E % ep != 0)
    throw std::invalid_argument("experts=" + std::to_string(E) + " are not divisible by ep=" +
                                std::to_string(ep));
  check_routes(n, E, k, rt.S, rt.cap);
  if (x.ndim() != 2 || x.dtype() != DType::kF32 || x.device() != Device::kCPU || x.dim(0) != n ||
      rt.expert.size() != size_t(n) * k || rt.gate.size() != size_t(n) * k ||
      rt.slot.size() != size_t(n) * k)
    throw std::invalid_argument("moe_dispatch_combine: want x (n=" + std::to_string(n) +
                                ", C) host f32 and (n, k) routing vectors, got x " + x.describe());
  for (int i = 0; i < n * k; ++i)
    if (rt.expert[i] < 0 || rt.expert[i] >= E || rt.slot[i] < -1 || rt.slot[i] >= rt.cap)
      throw std::invalid_argument("moe_dispatch_combine: assignment (" + std::to_string(i / k) +
                                  ", " + std::to_string(i % k) + ") has expert " +
                                  std::to_string(rt.expert[i]) + " of " + std::to_string(E) +
                                  ", slot " + std::to_string(rt.slot[i]) + " of cap " +
                                  std::to_string(rt.cap));
  const int64_t C = x.dim(1), G = n / rt.S, cap = rt.cap, El = E / ep, M = ep * G * cap;
  auto row = [&](int t, int j) { return ((int64_t(rt.expert[t * k + j]) * G + t / rt.S) * cap +
                                         rt.slot[t * k + j]) * C; };
  // 1. D (E, G, cap, C): each kept assignment's token at its expert's group slot.
  Tensor D = Tensor::zeros({E, G, cap, C}, DType::kF32, MemCategory::kCommBuffers);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j)
      if (rt.slot[t * k + j] >= 0) std::copy_n(x.f32() + t * C, C, D.f32() + row(t, j));
  // 2. to the experts' ranks: (E,G,cap,C) -> (ep, El, G, cap, C)     sends (ep-1)/ep·4·EGcapC
  Tensor X = Tensor::empty({ep, El, G, cap, C}, DType::kF32, MemCategory::kCommBuffers);
  ep_group.all_to_all(D, X);
  // 3. one call per held expert over its M = ep·G·cap rows, (source rank, group, slot) order.
  const int64_t block = G * cap * C;  // one source rank's rows for one expert
  Tensor Y = Tensor::empty({ep, El, G, cap, C}, DType::kF32, MemCategory::kCommBuffers);
  Tensor Xe = Tensor::empty({M, C}, DType::kF32, MemCategory::kActivations);
  for (int l = 0; l < El; ++l) {
    for (int i = 0; i < ep; ++i)
      std::copy_n(X.f32() + (int64_t(i) * El + l) * block, block, Xe.f32() + i * block);
    const Tensor Ye = expert(r * El + l, Xe);
    LLMP_CHECK(Ye.shape() == Xe.shape(), "expert " + std::to_string(r * El + l) + " returned " +
                                             Ye.describe() + " for rows " + Xe.describe());
    for (int i = 0; i < ep; ++i)
      std::copy_n(Ye.f32() + i * block, block, Y.f32() + (int64_t(i) * El + l) * block);
  }
  // 4. back to the tokens' ranks: (ep, El, G, cap, C) -> (E,G,cap,C)  sends (ep-1)/ep·4·EGcapC
  Tensor Yd = Tensor::empty({E, G, cap, C}, DType::kF32, MemCategory::kCommBuffers);
  ep_group.all_to_all(Y, Yd);
  // 5. combine: out[t] = Σ_{kept j} g_j · Yd[e_j][g][s_j]
  Tensor out = Tensor::zeros({n, C}, DType::kF32, MemCategory::kActivations);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j)
      if (rt.slot[t * k + j] >= 0)
        for (int64_t c = 0; c < C; ++c)
          out.f32()[t * C + c] += rt.gate[t * k + j] * Yd.f32()[row(t, j) + c];
  return out;
}

}  // namespace llmp
