// Routing statistics summed over ranks, and their one-line summary (moe_report.h).
#include "common/train/moe_report.h"

#include <algorithm>
#include <cstdio>

#include "common/nn/moe_routing.h"

namespace llmp {

MoeStats sum_over(MetricsReducer& metrics, const MoeStats& local) {
  MoeStats s = local;
  for (auto* v : {&s.routed, &s.kept, &s.first})
    for (int64_t& x : *v) x = static_cast<int64_t>(metrics.sum(static_cast<double>(x)));
  for (int64_t* x : {&s.assignments, &s.dropped, &s.aux_terms, &s.forwards})
    *x = static_cast<int64_t>(metrics.sum(static_cast<double>(*x)));
  s.aux_sum = metrics.sum(s.aux_sum);
  s.z_sum = metrics.sum(s.z_sum);
  return s;
}

std::string routing_summary(const MoeStats& s, const GPTConfig& cfg, int T) {
  if (s.routed.empty() || s.assignments == 0) return "routing: no MoE forward ran";
  const auto [lo, hi] = std::minmax_element(s.kept.begin(), s.kept.end());
  char line[320];
  std::snprintf(line, sizeof line,
                "routing (last step, all ranks): tokens per expert %lld..%lld kept of %lld "
                "assignments over %d MoE blocks, dropped %.2f%% (capacity %d per expert per "
                "sequence), load-balancing loss %.4f per block (1: balanced, %d: one expert)",
                static_cast<long long>(*lo), static_cast<long long>(*hi),
                static_cast<long long>(s.assignments), cfg.moe_blocks(),
                100.0 * s.dropped / s.assignments,
                expert_capacity(cfg.top_k, T, cfg.capacity_factor, cfg.experts),
                s.aux_terms ? s.aux_sum / s.aux_terms : 0.0, cfg.experts);
  std::string out = line;
  if (cfg.z_loss_coef > 0 && s.assignments > 0) {  // tokens over all MoE blocks: assignments / k
    std::snprintf(line, sizeof line, ", router z-loss %.4f per token and block (β = %g)",
                  s.z_sum / (static_cast<double>(s.assignments) / cfg.top_k), cfg.z_loss_coef);
    out += line;
  }
  return out;
}

}  // namespace llmp
