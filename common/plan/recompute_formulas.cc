// The closed forms of recompute_formulas.h.
#include "common/plan/recompute_formulas.h"

namespace llmp {

double activation_bytes_per_block(const RecomputeDims& d, Recompute policy, int every, int e) {
  const double s = d.s, b = d.b, h = d.h, a = d.a, L = d.L, t = d.t;
  const double split = d.sp ? t : 1;  // the residual stream's tensors: split only by SP
  // Per token: x_{l+1}, ln_1, res1, ln_2 (h each) and four fp32 statistics; qkv, atty, fc,
  // GELU(fc) (12h) and the probabilities (a·s) of this rank's heads and columns.
  const double residual = 4 * e * h / split + 16 / split, per_rank = e * 12 * h / t;
  const double probs = d.flash ? 4 * a / t : e * a * s / t;  // lse (fp32) or P
  switch (policy) {
    case Recompute::kNone: return s * b * (residual + per_rank + probs);
    case Recompute::kSelective: return s * b * (residual + per_rank);
    case Recompute::kFull: {
      const int64_t k = every < 1 ? 1 : every;
      const double kept = static_cast<double>((d.L + k - 1) / k);  // ⌈L/k⌉ outputs
      const double pa = d.partitioned && !d.sp ? t : 1;  // ZeRO-R Pa: 1/t of each checkpoint
      return kept / L * s * b * e * h / split / pa;
    }
  }
  return 0;
}

double moe_block_activation_bytes(const RecomputeDims& d, Recompute policy, int e, int64_t E,
                                  int64_t k, int64_t cap) {
  const double s = d.s, b = d.b, h = d.h, a = d.a;
  if (policy == Recompute::kFull) return activation_bytes_per_block(d, policy, 1, e);
  const double probs = policy == Recompute::kSelective ? 0 : d.flash ? 4 * a : e * a * s;
  const double per_token = e * 8 * h + 16 + probs + 9.0 * e * h * E * cap / s + e * k * h + 4 * k;
  return s * b * per_token;
}

double moe_block_forward_flops(int64_t b, int64_t s, int64_t h, int64_t E, int64_t k,
                               int64_t cap, bool flash) {
  const double B = b, S = s, H = h, N = B * S;
  const double attention = flash ? 3 * B * S * S * H : 2 * B * S * S * H + B * S * (S + 1) * H;
  return 8 * N * H * H + attention + 2 * N * H * E + 16 * H * H * E * B * cap + 2 * N * k * H;
}

double recomputed_flops_per_walk(const RecomputeDims& d, Recompute policy) {
  const double s = d.s, b = d.b, h = d.h, N = d.b * d.s, t = d.t;
  switch (policy) {
    case Recompute::kNone: return 0;
    case Recompute::kSelective: return d.L * 2 * b * s * s * h / t;
    case Recompute::kFull:  // flash: the blockwise kernels count 3 of 4 (s/2)² squares twice
      if (d.flash) return d.L * (24 * N * h * h + 3 * b * s * s * h) / t;
      return d.L * (24 * N * h * h + 2 * b * s * s * h + b * s * (s + 1) * h) / t;
  }
  return 0;
}

const char* activation_formula_text(Recompute policy, int every, int e, bool flash) {
  switch (policy) {
    case Recompute::kNone:
      if (flash) return e == 4 ? "sbh(64+4a/h)+16sb" : "sbh(32+4a/h)+16sb";
      return e == 4 ? "sbh(64+4as/h)+16sb" : "sbh(32+2as/h)+16sb";
    case Recompute::kSelective: return e == 4 ? "64sbh+16sb" : "32sbh+16sb";
    case Recompute::kFull:
      if (every > 1) return e == 4 ? "⌈L/k⌉/L·4sbh" : "⌈L/k⌉/L·2sbh";
      return e == 4 ? "4sbh" : "2sbh";
  }
  return "";
}

}  // namespace llmp
