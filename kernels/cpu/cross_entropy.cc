// Softmax cross-entropy in three steps (see cross_entropy.h). Per row: the max, one pass of
// Eigen's vectorised exp() written in place and its sum, then (backward) the rescale to
// dloss·softmax minus dloss at the target. Forward-only and backward share every step, so the
// loss they return is bit for bit the same; on one rank the result is that of the fused kernel.
#include "kernels/cpu/cross_entropy.h"

#include <Eigen/Core>
#include <cmath>

namespace llmp {
namespace cpu {
namespace {
using Row = Eigen::Map<Eigen::ArrayXf>;
}  // namespace

void cross_entropy_row_max(float* m, const float* z, int N, int Vr) {
  for (int n = 0; n < N; ++n)
    m[n] = Eigen::Map<const Eigen::ArrayXf>(z + static_cast<long>(n) * Vr, Vr).maxCoeff();
}

void cross_entropy_exp_sums(float* sums, float* z, const int32_t* y, int v0, int N, int Vr,
                            const float* m) {
  for (int n = 0; n < N; ++n) {
    Row zr(z + static_cast<long>(n) * Vr, Vr);  // (Vr)
    const int local = y[n] - v0;                // the target's row in this shard, if there
    sums[N + n] = (local >= 0 && local < Vr) ? zr[local] : 0.0f;
    zr = (zr - m[n]).exp();  // one exp pass, in place (the same with or without backward)
    sums[n] = zr.sum();
  }
}

double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                          const float* sums, float dloss, bool backward) {
  double total = 0.0;
  for (int n = 0; n < N; ++n) {
    const float s = sums[n], zy = sums[N + n];
    if (backward) {  // rescale exp(z - m) into dloss·softmax(z) - dloss·onehot(y)
      Row zr(z + static_cast<long>(n) * Vr, Vr);
      zr *= dloss / s;
      const int local = y[n] - v0;
      if (local >= 0 && local < Vr) zr[local] -= dloss;
    }
    // loss = logsumexp(z) - z_y, in double: a difference of two O(ln V) numbers.
    total += static_cast<double>(m[n]) + std::log(static_cast<double>(s)) - zy;
  }
  return total;
}

}  // namespace cpu
}  // namespace llmp
