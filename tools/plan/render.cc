// render_plan and render_report (see render.h).
#include "tools/plan/render.h"

#include <cstdarg>
#include <cstdio>

#include "tools/plan/format.h"

namespace llmp::plan {
namespace {

std::string printf_str(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printf_str(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

std::string render_plan(const PlanCost& c, const Cluster& cl, const std::string& in) {
  std::string s;
  const HybridShape& h = c.config.shape;
  s += in + "step " + secs_str(c.step) + " = compute " + secs_str(c.t_compute) + " + tp " +
       secs_str(c.t_tp + c.t_regather) + " + pp " + secs_str(c.t_pp) + " + bubble " +
       secs_str(c.bubble) + printf_str(" ((p-1)/(v·m) = %.3f)", double(h.pp - 1) / (h.v * h.m)) +
       " + dp " + secs_str(c.t_dp) + " + embedding " + secs_str(c.t_emb) +
       (h.sp ? " + sp replicated grads " + secs_str(c.t_repl) : "") + "\n";
  s += in + printf_str("MFU %.1f%% (model FLOPs %.3g per step), %.0f TFLOP/s per GPU counting "
                       "recomputation\n",
                       100 * c.mfu, c.model_flops, c.hw_flops_per_gpu / 1e12);
  for (const RankCost& r : c.ranks) {
    if (r.r != c.memory_rank) continue;
    s += in + "memory, pipeline rank " + std::to_string(r.r) + " (the largest): parameters " +
         bytes_str(r.plan.params) + ", gradients " + bytes_str(r.plan.grads) + ", optimizer " +
         bytes_str(r.plan.optimizer) + ", activations " + bytes_str(r.activations) + " (" +
         std::to_string(r.in_flight) + " in flight × " +
         bytes_str(r.plan.activations_per_microbatch) + ")" +
         (r.logits > 0 ? ", logits " + bytes_str(r.logits) : "") + " = " + bytes_str(r.memory) +
         " of " + bytes_str(cl.memory) + "\n";
  }
  const RankCost& r0 = c.ranks[0];
  s += in + "bytes sent per step, pipeline rank 0: tp " + bytes_str(r0.plan.tp + r0.plan.regather) +
       " (" + where(c.placement.tp) + "), pp " + bytes_str(r0.plan.pp) + " (" +
       where(c.placement.pp) + "), dp " + bytes_str(r0.plan.dp) + " (" + where(c.placement.dp) +
       "), embedding " + bytes_str(r0.plan.emb) + " (" + where(c.placement.emb) + ")\n";
  return s;
}

std::string render_report(const PlanInput& in, const SearchResult& res) {
  const ModelSpec& m = in.model;
  const Cluster& k = in.cluster;
  std::string s;
  s += printf_str("model %s: L %lld, C %lld, H %lld, V %lld, T %lld (Ψ = %.4g parameters); "
                  "global batch %lld; %s precision\n",
                  m.name.c_str(), (long long)m.L, (long long)m.C, (long long)m.H,
                  (long long)m.V, (long long)m.T, m.params(), (long long)in.batch,
                  in.options.mixed ? "mixed" : "fp32");
  s += printf_str("cluster: %d nodes × %d GPUs = %d; %s per GPU; peak %.4g TFLOP/s at an assumed "
                  "%.0f%% efficiency; intra-node %s, inter-node %s per GPU; latency %s per "
                  "message\n",
                  k.nodes, k.gpus_per_node, k.gpus(), bytes_str(k.memory).c_str(),
                  k.peak_flops / 1e12, 100 * k.efficiency, gbps_str(k.bw_intra).c_str(),
                  gbps_str(k.bw_inter).c_str(), secs_str(k.latency).c_str());
  if (!res.note.empty()) s += "note: " + res.note + "\n";
  s += printf_str("searched %zu configurations of %d GPUs; %zu fit in memory\n\n", res.all.size(),
                  res.gpus, res.ranked.size());
  if (res.ranked.empty()) {
    size_t least = 0;
    for (size_t i = 0; i < res.all.size(); ++i)
      if (res.all[i].memory < res.all[least].memory) least = i;
    s += "no configuration fits; the one needing the least memory:\n  " +
         config_str(res.all[least].config) + "\n" + render_plan(res.all[least], k, "    ");
    return s;
  }
  for (int i = 0; i < in.top && i < int(res.ranked.size()); ++i) {
    const PlanCost& c = res.all[res.ranked[i]];
    s += printf_str("#%d  ", i + 1) + config_str(c.config) + "\n" + render_plan(c, k, "    ");
  }
  if (res.gpus > 1) {  // the yardstick: the same search on one GPU
    Cluster one = k;
    one.gpus_per_node = one.nodes = 1;
    // The knobs that split the model over GPUs are freed (a held v > 1 or sp = on has no
    // configuration on one GPU); m and the recomputation stay as held, and are valid there too
    // (the multi-GPU plan's dp·m divides the batch, so m does).
    SearchOptions o = in.options;
    o.tp = o.pp = o.dp = o.v = 0;
    o.sp = o.zero = -1;
    const SearchResult alone = search(m, in.batch, one, o);
    const PlanCost& first = res.all[res.ranked[0]];
    if (alone.ranked.empty())
      s += "\none GPU alone: nothing fits\n";
    else
      s += printf_str("\none GPU alone: step %s (%s); the first plan's speed-up on %d GPUs: "
                      "%.2f×\n",
                      secs_str(alone.all[alone.ranked[0]].step).c_str(),
                      config_str(alone.all[alone.ranked[0]].config).c_str(),
                      res.gpus, alone.all[alone.ranked[0]].step / first.step);
  }
  s += "\nwhy not (the best plan with each value the first plan did not take):\n";
  for (const Alternative& a : alternatives(res, k))
    s += "  " + a.label + ": " + a.reason + "\n";
  return s;
}

}  // namespace llmp::plan
