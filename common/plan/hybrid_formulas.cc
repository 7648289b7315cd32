// hybrid_formulas (see hybrid_formulas.h): the closed forms, term by term as the header derives
// them.
#include "common/plan/hybrid_formulas.h"

#include <stdexcept>
#include <string>

#include "common/plan/recompute_formulas.h"

namespace llmp {
namespace {

std::string num(int64_t x) { return std::to_string(x); }

void check(const TpModelDims& d, const HybridShape& s, int64_t B, int64_t T) {
  if (s.dp < 1 || s.pp < 1 || s.tp < 1 || s.m < 1 || s.v < 1)
    throw std::invalid_argument("dp, pp, tp, m and v must be ≥ 1 (dp " + num(s.dp) + ", pp " +
                                num(s.pp) + ", tp " + num(s.tp) + ", m " + num(s.m) + ", v " +
                                num(s.v) + ")");
  if (d.H % s.tp || (4 * d.C) % s.tp || d.V % s.tp)
    throw std::invalid_argument("tensor-parallel size " + num(s.tp) + " does not divide H=" +
                                num(d.H) + ", 4C=" + num(4 * d.C) + " and V=" + num(d.V));
  if (d.L % (int64_t(s.pp) * s.v))
    throw std::invalid_argument("layers " + num(d.L) + " not divisible by p·v = " +
                                num(int64_t(s.pp) * s.v) + " (p=" + num(s.pp) + ", v=" +
                                num(s.v) + ")");
  if (B % (int64_t(s.dp) * s.m))
    throw std::invalid_argument("global batch " + num(B) + " is not divisible by dp·m = " +
                                num(int64_t(s.dp) * s.m) + " (dp=" + num(s.dp) + ", m=" +
                                num(s.m) + ")");
  if (s.sp && T % s.tp)
    throw std::invalid_argument("sequence length T=" + num(T) + " is not divisible by tp " +
                                num(s.tp) + " (sequence parallelism)");
  if (s.zero < 0 || s.zero > 2)
    throw std::invalid_argument("ZeRO stage " + num(s.zero) + " (expected 0, 1 or 2)");
}

}  // namespace

HybridRankPlan hybrid_rank_plan(const TpModelDims& d, const HybridShape& s, int r, int64_t B,
                                int64_t T, const HybridPrecision& prec) {
  check(d, s, B, T);
  if (r < 0 || r >= s.pp)
    throw std::invalid_argument("pipeline rank " + num(r) + " outside [0, " + num(s.pp) + ")");
  const int64_t t = s.tp, p = s.pp, v = s.v, C = d.C;
  const int64_t k = d.L / (p * v), last = p * v - 1;
  const int64_t b = B / s.dp / s.m, sh = s.sp ? t : 1;
  const double ring_ar = 2.0 * (t - 1) / t, ring_half = double(t - 1) / t;
  const double A = prec.act * b * T * C, a = prec.act * b * (T / sh) * C;

  const int64_t unit0 = d.V * C / t + d.ctx * C, block = 12 * C * C / t + 7 * C / t + 6 * C;
  HybridRankPlan out;
  int tp_calls_per_mb = 0;
  for (int64_t c = 0; c < v; ++c) {
    const int64_t vs = c * p + r;
    const bool first = vs == 0, is_last = vs == last;
    out.psi_r += k * block + (first ? unit0 : 0) + (is_last ? 2 * C : 0);
    out.psi_repl_r += k * 6 * C + (first ? d.ctx * C : 0) + (is_last ? 2 * C : 0);
    out.tp += s.m * ((4 * k + first + is_last) * ring_ar * A +
                     (is_last ? ring_ar * 4.0 * 3 * b * T : 0.0));
    tp_calls_per_mb += (s.sp ? 2 : 1) * (4 * k + first + is_last) + (is_last ? 2 : 0);
    out.sends += s.m * ((vs != last) + (vs != 0));
  }
  const bool wte_copy = p > 1 && r == last % p;
  if (wte_copy) out.psi_r += d.V * C / t;
  if (t > 1) {
    out.tp_calls = s.m * tp_calls_per_mb;
    if (s.recompute == Recompute::kFull) {  // each block's two g's once more
      out.tp += s.m * v * k * 2 * ring_ar * A;
      out.tp_calls += s.m * v * k * 2 * (s.sp ? 2 : 1);
    }
    if (s.sp) {
      out.regather = s.m * v * k * 2 * ring_half * A;
      // ZeRO-2 all-reduces them on the shards: each dp rank the replicated elements of its own
      // shard, Ψ_repl,r/dp of them on average (which ones depends on the layout's order).
      out.repl_grads = ring_ar * prec.grad * out.psi_repl_r / (s.zero == 2 ? s.dp : 1);
    }
  } else {
    out.tp = 0;
  }
  out.pp = out.sends * a;
  if (p > 1 && (r == 0 || wte_copy)) out.emb = prec.grad * d.V * C / t, out.emb_calls = 1;

  const int N = s.dp;
  out.shard = (out.psi_r + N - 1) / N;
  const double dp_ring = double(N - 1) / N * out.psi_r;
  out.params = prec.param * out.psi_r;
  out.optimizer = prec.K * (s.zero >= 1 ? out.shard : out.psi_r);
  out.grads = prec.grad * (s.zero >= 2 ? out.shard : out.psi_r);
  // ZeRO-2 under a pipeline defers the tied wte's two holders (D_r: unit 0 on the first stage,
  // the wte copy on the last): they add up whole over the m micro-batches, are summed over the
  // embedding pair, then reduce-scattered once (stages/hybrid_3d/zero2_grads.h).
  const int64_t deferred = p > 1 ? (r == 0 ? unit0 : 0) + (wte_copy ? d.V * C / t : 0) : 0;
  if (N > 1) {
    const double ring = double(N - 1) / N;
    if (s.zero == 0) out.dp = 2 * dp_ring * prec.grad, out.dp_calls = 1;
    else if (s.zero == 1) out.dp = dp_ring * (prec.grad + prec.param), out.dp_calls = 2;
    else
      out.dp = ring * prec.grad * double(s.m * (out.psi_r - deferred) + deferred) +
               dp_ring * prec.param,
      out.dp_calls = s.m + (deferred > 0) + 1;
  }
  out.activations_per_microbatch =
      k * activation_bytes_per_block({b, T, C, d.H, k, t, s.sp, false, s.flash}, s.recompute,
                                     s.recompute_every, static_cast<int>(prec.act));
  return out;
}

std::vector<HybridRankPlan> hybrid_plan(const TpModelDims& d, const HybridShape& s, int64_t B,
                                        int64_t T, const HybridPrecision& prec) {
  std::vector<HybridRankPlan> out;
  for (int r = 0; r < s.pp; ++r) out.push_back(hybrid_rank_plan(d, s, r, B, T, prec));
  return out;
}

}  // namespace llmp
