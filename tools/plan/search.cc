// search and alternatives (see search.h).
#include "tools/plan/search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "tools/plan/format.h"

namespace llmp::plan {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// Every valid configuration of exactly N GPUs.
std::vector<PlanCost> enumerate(const ModelSpec& md, int64_t B, const Cluster& cl, int N,
                                const SearchOptions& opt) {
  std::vector<PlanCost> out;
  for (int64_t tp : divisors(N)) {
    if (md.H % tp || (4 * md.C) % tp || md.V % tp || (opt.tp && tp != opt.tp)) continue;
    for (int64_t pp : divisors(N / tp)) {
      if (md.L % pp || (opt.pp && pp != opt.pp)) continue;
      const int64_t dp = N / tp / pp;
      if (B % dp || (opt.dp && dp != opt.dp)) continue;
      for (int sp = 0; sp <= (tp > 1 && md.T % tp == 0 ? 1 : 0); ++sp)
        for (int zero = 0; zero <= (dp > 1 ? opt.max_zero : 0); ++zero)
          for (int64_t m : divisors(B / dp))
            for (int64_t v : divisors(md.L / pp)) {
              if (v > opt.max_v || (v > 1 && (pp == 1 || m % pp))) continue;
              if ((opt.m && m != opt.m) || (opt.v && v != opt.v) ||
                  (opt.zero >= 0 && zero != opt.zero) || (opt.sp >= 0 && sp != opt.sp))
                continue;
              for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                if (opt.recompute >= 0 && int(rc) != opt.recompute) continue;
                PlanConfig c;
                c.mixed = opt.mixed;
                c.shape.dp = int(dp), c.shape.pp = int(pp), c.shape.tp = int(tp);
                c.shape.sp = sp, c.shape.zero = zero, c.shape.m = int(m), c.shape.v = int(v);
                c.shape.recompute = rc;
                out.push_back(evaluate(md, B, cl, c));
              }
            }
    }
  }
  return out;
}

// The step's components, named, for the comparison of two plans.
struct Part {
  const char* name;
  double PlanCost::*field;
};
const Part kParts[] = {
    {"compute", &PlanCost::t_compute}, {"bubble", &PlanCost::bubble},
    {"tp", &PlanCost::t_tp},           {"sp re-gather", &PlanCost::t_regather},
    {"pp", &PlanCost::t_pp},           {"dp", &PlanCost::t_dp},
    {"embedding", &PlanCost::t_emb},   {"sp replicated grads", &PlanCost::t_repl},
};

// Where the group behind a component sits, when that differs between the two plans.
std::string placement_note(const char* part, const PlanCost& alt, const PlanCost& best,
                           const Cluster& cl) {
  const std::string p = part;
  bool a = false, b = false;
  std::string what;
  const HybridShape& s = alt.config.shape;
  if (p == "tp" || p == "sp re-gather" || p == "sp replicated grads") {
    a = alt.placement.tp, b = best.placement.tp;
    what = "tp = " + std::to_string(s.tp) + (a ? " spans nodes: its collectives cross"
                                               : " stays inside a node: its collectives use");
  } else if (p == "pp") {
    a = alt.placement.pp, b = best.placement.pp;
    what = "pp group" + std::string(a ? " spans nodes: its sends cross" : " inside a node: uses");
  } else if (p == "dp") {
    a = alt.placement.dp, b = best.placement.dp;
    what = "dp = " + std::to_string(s.dp) + (a ? " spans nodes: its gradient collectives cross"
                                               : " inside a node: uses");
  } else if (p == "embedding") {
    a = alt.placement.emb, b = best.placement.emb;
    what = "the tied-embedding all_reduce" + std::string(a ? " crosses" : " uses");
  } else {
    return "";
  }
  if (a == b) return "";
  return "; " + what + (a ? " the inter-node link (" + gbps_str(cl.bw_inter) + " against " +
                                gbps_str(cl.bw_intra) + ")"
                          : " the intra-node link (" + gbps_str(cl.bw_intra) + ")");
}

std::string loss_reason(const PlanCost& alt, const PlanCost& best, const Cluster& cl) {
  std::vector<std::pair<double, const Part*>> d;
  for (const Part& p : kParts) d.push_back({alt.*(p.field) - best.*(p.field), &p});
  std::sort(d.begin(), d.end(), [](auto& x, auto& y) { return x.first > y.first; });
  std::string r = "+" + secs_str(alt.step - best.step) + " per step (" + secs_str(alt.step) +
                  "): ";
  int shown = 0;
  for (auto& [delta, part] : d) {
    if (delta <= 0 || shown == 2) break;
    if (shown++) r += ", ";
    r += std::string(part->name) + " " + secs_str(alt.*(part->field)) + " against " +
         secs_str(best.*(part->field)) + " (+" + secs_str(delta) + ")";
    r += placement_note(part->name, alt, best, cl);
  }
  if (!shown) r += "no component larger; the sum of small ones";
  return r + " [" + config_str(alt.config) + "]";
}

std::string memory_reason(const PlanCost& c, const Cluster& cl) {
  const RankCost* rc = &c.ranks[0];
  for (const RankCost& x : c.ranks)
    if (x.r == c.memory_rank) rc = &x;
  return "does not fit: the least memory any such plan needs is " + bytes_str(c.memory) +
         " per GPU > " + bytes_str(cl.memory) + " (" + config_str(c.config) + ", pipeline rank " +
         std::to_string(rc->r) + ": parameters " + bytes_str(rc->plan.params) + ", gradients " +
         bytes_str(rc->plan.grads) + ", optimizer " + bytes_str(rc->plan.optimizer) +
         ", activations " + bytes_str(rc->activations + rc->logits) + ")";
}

}  // namespace

SearchResult search(const ModelSpec& md, int64_t B, const Cluster& cl, const SearchOptions& opt) {
  SearchResult res;
  for (int N = cl.gpus(); N >= 1; --N) {
    res.all = enumerate(md, B, cl, N, opt);
    if (res.all.empty()) continue;
    res.gpus = N;
    if (N < cl.gpus())
      res.note = "no configuration of all " + std::to_string(cl.gpus()) +
                 " GPUs is valid (dp must divide the batch " + std::to_string(B) +
                 ", tp divide H, 4C and V, pp divide L, and the knobs held fixed hold): the plans "
                 "use " + std::to_string(N);
    break;
  }
  if (res.all.empty())
    throw std::invalid_argument("no valid configuration for batch " + std::to_string(B) +
                                " on up to " + std::to_string(cl.gpus()) + " GPUs (with " +
                                "the knobs held fixed: tp " + std::to_string(opt.tp) + ", pp " +
                                std::to_string(opt.pp) + ", dp " + std::to_string(opt.dp) +
                                ", m " + std::to_string(opt.m) + ", v " + std::to_string(opt.v) +
                                "; 0 = free)");
  for (size_t i = 0; i < res.all.size(); ++i)
    if (res.all[i].fits) res.ranked.push_back(i);
  std::stable_sort(res.ranked.begin(), res.ranked.end(), [&](size_t a, size_t b) {
    const PlanCost &x = res.all[a], &y = res.all[b];
    return x.step != y.step ? x.step < y.step : x.memory < y.memory;
  });
  return res;
}

std::vector<Alternative> alternatives(const SearchResult& res, const Cluster& cl) {
  std::vector<Alternative> out;
  if (res.ranked.empty()) return out;
  const PlanCost& best = res.all[res.ranked[0]];
  using Key = std::function<std::string(const HybridShape&)>;
  const std::vector<std::pair<std::string, Key>> knobs = {
      {"tp", [](const HybridShape& s) { return std::to_string(s.tp); }},
      {"pp", [](const HybridShape& s) { return std::to_string(s.pp); }},
      {"dp", [](const HybridShape& s) { return std::to_string(s.dp); }},
      {"sp", [](const HybridShape& s) { return std::string(s.sp ? "on" : "off"); }},
      {"ZeRO", [](const HybridShape& s) { return std::to_string(s.zero); }},
      {"v", [](const HybridShape& s) { return std::to_string(s.v); }},
      {"recompute", [](const HybridShape& s) { return std::string(to_string(s.recompute)); }},
  };
  for (const auto& [name, key] : knobs) {
    const std::string mine = key(best.config.shape);
    std::vector<std::string> values;
    for (const PlanCost& c : res.all) {
      const std::string k = key(c.config.shape);
      if (k != mine && std::find(values.begin(), values.end(), k) == values.end())
        values.push_back(k);
    }
    for (const std::string& val : values) {
      Alternative a;
      a.label = name + " = " + val;
      bool any = false;
      for (size_t i : res.ranked)  // fastest first
        if (key(res.all[i].config.shape) == val) { a.index = i, a.fits = any = true; break; }
      if (!any) {
        double least = INFINITY;
        for (size_t i = 0; i < res.all.size(); ++i)
          if (key(res.all[i].config.shape) == val && res.all[i].memory < least)
            least = res.all[i].memory, a.index = i;
      }
      a.reason = a.fits ? loss_reason(res.all[a.index], best, cl)
                        : memory_reason(res.all[a.index], cl);
      out.push_back(a);
    }
  }
  return out;
}

}  // namespace llmp::plan
