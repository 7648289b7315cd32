// Closed forms of 2D / 2.5D tensor parallelism (see tp2d_formulas.h for the derivations).
#include "common/plan/tp2d_formulas.h"

namespace llmp {

double tp2d_vector_params(const TpModelDims& m, int q) {
  return double(m.ctx * m.C + 13 * m.L * m.C + 2 * m.C) / q;
}

double tp2d_params_per_rank(const TpModelDims& m, int q) {
  return tp2d_vector_params(m, q) + double(m.V * m.C + 12 * m.L * m.C * m.C) / (double(q) * q);
}

double tp2d_activation_bytes_per_block(const TpModelDims& m, int64_t B, int64_t T, int q, int d,
                                       Recompute policy, int every, bool flash) {
  const double Bl = double(B) / (d * q), N = Bl * T;
  switch (policy) {
    case Recompute::kFull: {
      const double checkpoints = (m.L + every - 1) / every;  // ⌈L/k⌉
      return checkpoints / m.L * 4.0 * N * m.C / q;
    }
    case Recompute::kSelective:
      if (!flash) return 4.0 * (15.0 * N * m.C / q + 4.0 * N);
      break;  // flash keeps no P to drop: its lse, as without recomputation
    case Recompute::kNone: break;
  }
  const double scores = flash ? N * m.H / q : Bl * m.H * T * T / q;  // lse, or P
  return 4.0 * (15.0 * N * m.C / q + 4.0 * N + scores);
}

const char* tp2d_activation_formula_text(Recompute policy, bool flash) {
  if (policy == Recompute::kFull) return "⌈L/k⌉/L·4N·C/q (the checkpoints)";
  if (flash) return "4(15N·C/q + 4N + N·H/q) (flash: lse, no P)";
  if (policy == Recompute::kSelective) return "4(15N·C/q + 4N) (P made again)";
  return "4(15N·C/q + 4N + Bl·H·T²/q)";
}

double tp2d_recompute_row_bytes_per_step(const TpModelDims& m, int64_t B, int64_t T, int q,
                                         int d) {
  if (q == 1) return 0;
  const double N = double(B) * T / (d * q), f = 2.0 * (q - 1) / q;
  return m.L * (28.0 * N * m.C + f * 16.0 * N);
}

double tp2d_recompute_column_bytes_per_step(const TpModelDims& m, int q) {
  if (q == 1) return 0;
  return m.L * 48.0 * m.C * m.C / q;
}

double tp2d_recompute_calls_per_step(const TpModelDims& m, int q) {
  return m.L * (8.0 * q + 4);
}

double tp2d_row_bytes_per_step(const TpModelDims& m, int64_t B, int64_t T, int q, int d) {
  if (q == 1) return 0;
  const double N = double(B) * T / (d * q), f = 2.0 * (q - 1) / q;
  return m.L * 84.0 * N * m.C + 12.0 * N * m.V + (2 * m.L + 1) * f * 16.0 * N + f * 12.0 * N;
}

double tp2d_column_bytes_per_step(const TpModelDims& m, int64_t B, int64_t T, int q, int d) {
  if (q == 1) return 0;
  const double N = double(B) * T / (d * q), f = 2.0 * (q - 1) / q;
  return m.L * 144.0 * m.C * m.C / q + 12.0 * m.V * m.C / q + 2.0 * (q - 1) / q * 4.0 * N * m.C +
         f * 8.0 + f * 4.0 * tp2d_vector_params(m, q);
}

double tp2d_depth_bytes_per_step(const TpModelDims& m, int q, int d) {
  const double f = 2.0 * (d - 1) / d;
  return f * 8.0 + f * 4.0 * tp2d_params_per_rank(m, q);
}

double tp2d_calls_per_step(const TpModelDims& m, int q) {
  const double row = (12.0 * m.L + 3) * q + 3.0 * (2 * m.L + 1) + 2;
  const double col = (12.0 * m.L + 3) * q + 4;
  return row + col + 2;
}

}  // namespace llmp
