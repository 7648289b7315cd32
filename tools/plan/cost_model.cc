// The planner's cost model (see cost_model.h): hybrid_formulas' bytes turned into seconds on a
// cluster, plus the in-flight micro-batches, FLOPs, the bubble and ZeRO-3.
#include "tools/plan/cost_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace llmp::plan {

double ModelSpec::params() const {
  return double(V) * C + double(ctx) * C + double(L) * (12.0 * C * C + 13.0 * C) + 2.0 * C;
}

std::vector<int> evaluated_ranks(int pp) {
  std::vector<int> r{0};
  if (pp > 2) r.push_back(1);
  if (pp > 1) r.push_back(pp - 1);
  return r;
}

int in_flight(int p, int m, int v, int r) {
  if (v == 1) return std::min(m, p - r);
  return std::min(2 * (p - r - 1) + (v - 1) * p + 1, m * v);
}

double model_flops(const ModelSpec& d, int64_t B) {
  const double T = double(d.T), C = double(d.C);
  return 72.0 * B * T * d.L * C * C * (1 + T / (6 * C) + double(d.V) / (12.0 * d.L * C));
}

namespace {

// Forward FLOPs of one block for one sequence: 24TC² + 4T²C.
double block_forward(const ModelSpec& d) {
  const double T = double(d.T), C = double(d.C);
  return 24 * T * C * C + 4 * T * T * C;
}

// FLOPs rank r does per step: its blocks (fwd + 2×fwd bwd + recomputation) and, on the last
// virtual stage's rank, the head (6TCV per sequence), for B/dp sequences, split over t.
double rank_flops(const ModelSpec& d, int64_t B, const HybridShape& s, int r) {
  const double T = double(d.T), C = double(d.C), seqs = double(B) / s.dp;
  const int64_t blocks = d.L / s.pp;  // k·v blocks of k = L/(p·v)
  double per_block = 3 * block_forward(d);
  if (s.recompute == Recompute::kFull) per_block += block_forward(d);
  if (s.recompute == Recompute::kSelective) per_block += 2 * T * T * C;
  double f = blocks * per_block * seqs;
  if (r == s.pp - 1) f += 6 * T * C * double(d.V) * seqs;  // the last virtual stage is on p-1
  return f / s.tp;
}

// α-β time of a group's step traffic: bytes/bw + α·ring steps.
double seconds(double bytes, double steps, bool inter, const Cluster& c) {
  if (bytes <= 0 && steps <= 0) return 0;
  return bytes / (inter ? c.bw_inter : c.bw_intra) + c.latency * steps;
}

}  // namespace

namespace {

void check_config(const HybridShape& s) {
  if (s.zero < 0 || s.zero > 3)
    throw std::invalid_argument("ZeRO stage " + std::to_string(s.zero) +
                                " (expected 0, 1, 2 or 3)");
  if (s.v > 1 && s.m % s.pp)
    throw std::invalid_argument("interleaved 1F1B (v " + std::to_string(s.v) +
                                ") needs m % p == 0 (m " + std::to_string(s.m) + ", p " +
                                std::to_string(s.pp) + ")");
}

RankCost rank_cost_placed(const ModelSpec& model, int64_t B, const Cluster& cluster,
                          const PlanConfig& cfg, int r, const GroupPlacement& g) {
  const HybridShape& s = cfg.shape;
  const HybridPrecision prec = cfg.mixed ? HybridPrecision::mixed() : HybridPrecision::fp32();
  HybridShape base = s;
  if (s.zero == 3) base.zero = 2;  // memory and dp bytes replaced below
  const int64_t b = B / s.dp / s.m;
  const double t = s.tp, n = s.dp;
  RankCost rc;
  rc.r = r;
  rc.plan = hybrid_rank_plan(model.dims(), base, r, B, model.T, prec);
  HybridRankPlan& h = rc.plan;
  if (s.zero == 3 && s.dp > 1) {
    h.params = prec.param * h.shard;
    h.dp = s.m * (n - 1) / n * h.psi_r * (2 * prec.param + prec.grad);
    h.dp_calls = 3 * s.m;
  }
  rc.in_flight = in_flight(s.pp, s.m, s.v, r);
  rc.activations = rc.in_flight * h.activations_per_microbatch;
  if (r == s.pp - 1) rc.logits = 4.0 * b * model.T * model.V / s.tp;
  rc.memory = h.params + h.grads + h.optimizer + rc.activations + rc.logits;
  rc.flops = rank_flops(model, B, s, r);
  rc.compute = rc.flops / (cluster.peak_flops * cluster.efficiency);
  // Ring steps: an all_reduce call is 2(n-1), a reduce_scatter or all_gather n-1; SP's calls
  // are the latter, plain TP's the former.
  const double tp_steps = h.tp_calls * (t - 1) * (s.sp ? 1 : 2);
  rc.tp = seconds(h.tp, tp_steps, g.tp, cluster);
  rc.regather = seconds(h.regather, s.sp ? s.m * s.v * (model.L / (s.pp * s.v)) * 2 * (t - 1) : 0,
                        g.tp, cluster);
  rc.repl = seconds(h.repl_grads, s.sp && s.tp > 1 ? 2 * (t - 1) : 0, g.tp, cluster);
  rc.pp = seconds(h.pp, h.sends, g.pp, cluster);
  rc.emb = seconds(h.emb, 2.0 * h.emb_calls, g.emb, cluster);
  rc.dp = seconds(h.dp, h.dp_calls * (n - 1) * (s.zero == 0 ? 2 : 1), g.dp, cluster);
  return rc;
}

}  // namespace

RankCost rank_cost(const ModelSpec& model, int64_t B, const Cluster& cluster,
                   const PlanConfig& cfg, int r) {
  check_config(cfg.shape);
  return rank_cost_placed(model, B, cluster, cfg, r,
                          place_groups(cfg.shape.dp, cfg.shape.pp, cfg.shape.tp,
                                       cluster.gpus_per_node));
}

PlanCost evaluate(const ModelSpec& model, int64_t B, const Cluster& cluster,
                  const PlanConfig& cfg) {
  const HybridShape& s = cfg.shape;
  check_config(s);
  PlanCost out;
  out.config = cfg;
  out.placement = place_groups(s.dp, s.pp, s.tp, cluster.gpus_per_node);
  for (int r : evaluated_ranks(s.pp))
    out.ranks.push_back(rank_cost_placed(model, B, cluster, cfg, r, out.placement));
  const RankCost* worst = &out.ranks[0];
  const RankCost* late = &out.ranks[0];
  for (const RankCost& rc : out.ranks) {
    if (rc.memory > out.memory) out.memory = rc.memory, out.memory_rank = rc.r;
    if (rc.work() > worst->work()) worst = &rc;
    if (rc.after() > late->after()) late = &rc;
  }
  out.fits = out.memory <= cluster.memory;
  const double bubble_fraction = double(s.pp - 1) / (double(s.v) * s.m);
  out.bubble = worst->work() * bubble_fraction;
  out.pipeline = worst->work() + out.bubble;
  out.after = late->after();
  out.step = out.pipeline + out.after;
  out.t_compute = worst->compute, out.t_tp = worst->tp, out.t_regather = worst->regather;
  out.t_pp = worst->pp, out.t_dp = late->dp, out.t_emb = late->emb, out.t_repl = late->repl;
  out.model_flops = model_flops(model, B);
  // Recomputation's extra: full, one more forward of every block; selective, QKᵀ again.
  const double T = double(model.T), C = double(model.C);
  double extra = 0;
  if (s.recompute == Recompute::kFull) extra = double(B) * model.L * block_forward(model);
  if (s.recompute == Recompute::kSelective) extra = double(B) * model.L * 2 * T * T * C;
  out.hardware_flops = out.model_flops + extra;
  const double N = cfg.gpus();
  out.mfu = out.model_flops / (out.step * N * cluster.peak_flops);
  out.hw_flops_per_gpu = out.hardware_flops / (out.step * N);
  return out;
}

}  // namespace llmp::plan
