// The closed forms of tp_formulas.h, one line each.
#include "common/plan/tp_formulas.h"

#include <algorithm>

#include "common/plan/recompute_formulas.h"

namespace llmp {

double tp_params_per_rank(const TpModelDims& d, int t) {
  const double C = d.C;
  return d.V * C / t + d.ctx * C + d.L * (12 * C * C / t + 7 * C / t + 6 * C) + 2 * C;
}

double tp_replicated_params(const TpModelDims& d) {
  return double(d.ctx) * d.C + 6.0 * d.L * d.C + 2.0 * d.C;
}

double tp_activation_bytes_per_block(const TpModelDims& d, int64_t B, int64_t T, int t,
                                     bool sequence_parallel) {
  // The per-tensor sum is written once, in recompute_formulas.cc (policy none, fp32).
  return activation_bytes_per_block({B, T, d.C, d.H, d.L, t, sequence_parallel}, Recompute::kNone,
                                    1, 4);
}

double tp_bytes_per_step(const TpModelDims& d, int64_t B, int64_t T, int t, int e) {
  const double ring = 2.0 * (t - 1) / t, S = double(e) * B * T * d.C;
  return (4.0 * d.L + 2) * ring * S + ring * 12.0 * B * T;
}

double tp_recompute_bytes_per_step(const TpModelDims& d, int64_t B, int64_t T, int t, int e) {
  return 4.0 * d.L * (t - 1) / t * e * B * T * d.C;
}

double tp_collective_calls_per_step(const TpModelDims& d, int64_t B, int64_t T, int t,
                                    bool sequence_parallel, bool full_recompute,
                                    int recompute_every, bool partition_checkpoints) {
  const int64_t N = B * T, Vr = d.V / t;
  const int64_t R = std::max<int64_t>(1, std::min<int64_t>(N, (int64_t{1} << 22) / Vr));
  const int64_t chunks = (N + R - 1) / R;  // ⌈BT/R⌉
  const double L = d.L;
  const double ce = t > 1 ? 2.0 * chunks : 0.0;  // the vocab-parallel cross-entropy's reductions
  double calls = sequence_parallel ? 10 * L + 5 + ce : 4 * L + 2 + ce;
  if (full_recompute) calls += sequence_parallel ? 4 * L : 2 * L;
  if (full_recompute && partition_checkpoints && !sequence_parallel && t > 1)
    calls += (d.L + recompute_every - 1) / recompute_every;  // ⌈L/k⌉
  return calls;
}

double sp_regather_bytes_per_step(const TpModelDims& d, int64_t B, int64_t T, int t, int e) {
  return 2.0 * d.L * (t - 1) / t * e * B * T * d.C;
}

double sp_replicated_grad_bytes_per_step(const TpModelDims& d, int t, int e) {
  return 2.0 * (t - 1) / t * e * tp_replicated_params(d);
}

}  // namespace llmp
