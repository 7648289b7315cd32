// Top-k routing with expert capacity, its backward, and the load-balancing loss (moe_routing.h).
#include "common/nn/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace llmp {

std::string routing_error(int E, int k, double capacity_factor) {
  std::ostringstream s;
  if (E < 1)
    s << "experts=" << E << " must be >= 1";
  else if (k < 1 || k > E)
    s << "top_k=" << k << (k < 1 ? " must be >= 1" : " exceeds experts=" + std::to_string(E));
  else if (!(capacity_factor > 0))
    s << "capacity factor " << capacity_factor << " must be > 0";
  return s.str();
}

int expert_capacity(int k, int group_tokens, double capacity_factor, int E) {
  const std::string err = routing_error(E, k, capacity_factor);
  if (!err.empty()) throw std::invalid_argument(err);
  if (group_tokens < 1)
    throw std::invalid_argument("token group of " + std::to_string(group_tokens) + " tokens");
  const double cap = std::ceil(static_cast<double>(k) * group_tokens * capacity_factor / E);
  return std::max(1, static_cast<int>(cap));
}

Routing route(const float* logits, int n, int E, int k, int S, double capacity_factor) {
  Routing r;
  r.cap = expert_capacity(k, S, capacity_factor, E);
  if (n % S != 0)
    throw std::invalid_argument("route: " + std::to_string(n) + " tokens are not groups of " +
                                std::to_string(S));
  r.n = n, r.E = E, r.k = k, r.S = S;
  r.probs.resize(static_cast<size_t>(n) * E);
  r.lse.resize(n);
  r.expert.resize(static_cast<size_t>(n) * k);
  r.gate.resize(static_cast<size_t>(n) * k);
  r.slot.assign(static_cast<size_t>(n) * k, -1);
  r.routed.assign(E, 0);
  r.kept.assign(E, 0);
  std::vector<int> order(E);
  for (int t = 0; t < n; ++t) {
    // probs = softmax(logits), max-subtracted.
    const float* z = logits + static_cast<size_t>(t) * E;
    float* p = &r.probs[static_cast<size_t>(t) * E];
    const float zmax = *std::max_element(z, z + E);
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += (p[e] = std::exp(z[e] - zmax));
    for (int e = 0; e < E; ++e) p[e] = static_cast<float>(p[e] / sum);
    const double lse = zmax + std::log(sum);  // log Σ_e exp z_e, the z-loss's term
    r.lse[t] = static_cast<float>(lse);
    r.z_sum += lse * lse;
    // top-k by decreasing probability; stable, so ties go to the lower index.
    for (int e = 0; e < E; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    double topk = 0;
    for (int j = 0; j < k; ++j) topk += p[order[j]];
    for (int j = 0; j < k; ++j) {
      r.expert[t * k + j] = order[j];
      r.gate[t * k + j] = k == 1 ? p[order[j]] : static_cast<float>(p[order[j]] / topk);
      ++r.routed[order[j]];
    }
  }
  // Slots, group by group: all first choices in token order, then all second choices, ...
  std::vector<int> used(E);
  std::vector<double> f(E), P(E);
  for (int g = 0; g < n / S; ++g) {
    std::fill(used.begin(), used.end(), 0);
    for (int j = 0; j < k; ++j)
      for (int t = g * S; t < (g + 1) * S; ++t) {
        const int e = r.expert[t * k + j];
        if (used[e] < r.cap) {
          r.slot[t * k + j] = used[e]++;
          ++r.kept[e];
        }
      }
    // aux_g = E · Σ_e f_e · P_e.
    std::fill(f.begin(), f.end(), 0.0);
    std::fill(P.begin(), P.end(), 0.0);
    for (int t = g * S; t < (g + 1) * S; ++t) {
      f[r.expert[t * k]] += 1.0 / S;
      for (int e = 0; e < E; ++e) P[e] += r.probs[static_cast<size_t>(t) * E + e] / S;
    }
    double aux = 0;
    for (int e = 0; e < E; ++e) aux += f[e] * P[e];
    r.aux_sum += E * aux;
  }
  return r;
}

void route_backward(const Routing& r, const float* dgate, double aux_weight, float* dlogits,
                    double z_weight) {
  const int E = r.E, k = r.k, S = r.S;
  std::vector<double> dp(E), f(E);
  for (int g = 0; g < r.groups(); ++g) {
    std::fill(f.begin(), f.end(), 0.0);
    for (int t = g * S; t < (g + 1) * S; ++t) f[r.expert[t * k]] += 1.0 / S;
    for (int t = g * S; t < (g + 1) * S; ++t) {
      const float* p = &r.probs[static_cast<size_t>(t) * E];
      // The load-balancing loss: d(E·Σ_e f_e·P_e)/dp_{t,e} = E·f_e/S.
      for (int e = 0; e < E; ++e) dp[e] = aux_weight * E * f[e] / S;
      // The gates.
      const int* ex = &r.expert[t * k];
      const float* dg = dgate + static_cast<size_t>(t) * k;
      if (k == 1) {
        dp[ex[0]] += dg[0];
      } else {
        double topk = 0, dot = 0;
        for (int j = 0; j < k; ++j) topk += p[ex[j]], dot += dg[j] * r.gate[t * k + j];
        for (int j = 0; j < k; ++j) dp[ex[j]] += (dg[j] - dot) / topk;
      }
      // Softmax: dz_e = p_e (dp_e − Σ_e' dp_e' p_e').
      double s = 0;
      for (int e = 0; e < E; ++e) s += dp[e] * p[e];
      float* dz = dlogits + static_cast<size_t>(t) * E;
      // The z-loss: d(lse²)/dz_e = 2·lse·p_e.
      const double zg = z_weight * 2.0 * r.lse[t];
      for (int e = 0; e < E; ++e) dz[e] = static_cast<float>(p[e] * (dp[e] - s + zg));
    }
  }
}

}  // namespace llmp
