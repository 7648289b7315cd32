// Closed forms of 3D tensor parallelism (see tp3d_formulas.h).
#include "common/plan/tp3d_formulas.h"

namespace llmp {

double tp3d_params_per_rank(const Tp3dDims& d, int q) {
  const double C = d.d, q3 = double(q) * q * q;
  return (double(d.vocab) * C + 12.0 * d.layers * C * C) / q3 +
         (double(d.ctx) * C + 13.0 * d.layers * C + 2.0 * C) / q;
}

double tp3d_activation_bytes_per_block(const Tp3dDims& d, int B, int T, int q, Recompute policy,
                                       int every, bool flash) {
  const double BT = double(B) * T, q2 = double(q) * q, q3 = q2 * q;
  switch (policy) {
    case Recompute::kFull: {
      const double checkpoints = (d.layers + every - 1) / every;  // ⌈L/k⌉
      return checkpoints / d.layers * 4.0 * BT * d.d / q3;
    }
    case Recompute::kSelective:
      if (!flash) return 4.0 * (BT * d.d * (9.0 + 7.0 * q) / q3 + 4.0 * BT / q2);
      break;  // flash keeps no P to drop
    case Recompute::kNone: break;
  }
  if (flash)  // lse instead of P
    return 4.0 * (BT * d.d * (9.0 + 7.0 * q) / q3 + 4.0 * BT / q2 + BT * d.heads / q3);
  return 4.0 * (BT * d.d * (9.0 + 7.0 * q) / q3 + 4.0 * BT / q2 + double(B) * d.heads * T * T / q3);
}

const char* tp3d_activation_formula_text(Recompute policy, bool flash) {
  if (policy == Recompute::kFull) return "⌈L/k⌉/L·4BTC/q³ (the checkpoints)";
  if (flash) return "4[BTC(9+7q)/q³ + 4BT/q² + BHT/q³] (flash: lse, no P)";
  if (policy == Recompute::kSelective) return "4[BTC(9+7q)/q³ + 4BT/q²] (P made again)";
  return "4[BTC(9+7q)/q³ + 4BT/q² + BHT²/q³]";
}

Tp3dBytes tp3d_recompute_bytes_per_step(const Tp3dDims& d, int B, int T, int q) {
  const double C = d.d, L = d.layers, M = double(B) * T, q2 = double(q) * q;
  const double f = (q - 1.0) / q, m = M / q2;
  Tp3dBytes b;
  b.i_axis = 48.0 * f / q2 * L * C * C;
  b.j_axis = 16.0 * f / q2 * L * M * C;
  b.l_axis = 48.0 * f / q2 * L * M * C + 32.0 * f * L * m;
  return b;
}

int64_t tp3d_recompute_calls_per_step(const Tp3dDims& d) { return 16 * int64_t{d.layers}; }

Tp3dBytes tp3d_bytes_per_step(const Tp3dDims& d, int B, int T, int q) {
  const double C = d.d, V = d.vocab, L = d.layers, M = double(B) * T, q2 = double(q) * q;
  const double f = (q - 1.0) / q, f2 = (q2 - 1.0) / q2, m = M / q2;
  Tp3dBytes b;
  b.i_axis = 12.0 * f / q2 * (12.0 * L * C * C + V * C);
  b.j_axis = 4.0 * f / q2 * (8.0 * L + 2.0) * M * C + 24.0 * f * m;
  b.l_axis = 4.0 * f / q2 * (24.0 * L * C + 2.0 * V) * M + 32.0 * f * m * (2.0 * L + 1.0);
  b.plane_l = 8.0 * f2 * M * C / q + 8.0 * f2 * (d.ctx + 6.0 * L + 2.0) * C / q;
  b.plane_j = 8.0 * f2 * 7.0 * L * C / q + 16.0 * f2;
  return b;
}

int64_t tp3d_calls_per_step(const Tp3dDims& d) { return 34LL * d.layers + 17; }

}  // namespace llmp
