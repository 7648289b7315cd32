// Fused softmax cross-entropy forward/backward (see cross_entropy.h). Per row: the max, one pass
// of Eigen's vectorised exp() written in place, the sum, and (backward) the rescale to
// dloss·softmax minus dloss at the target. Forward-only and backward share every step, so the
// loss they return is bit for bit the same.
#include "kernels/cpu/cross_entropy.h"

#include <Eigen/Core>
#include <cmath>

namespace llmp {
namespace cpu {

double softmax_cross_entropy(float* logits, const int32_t* targets, int N, int V, float dloss,
                             bool backward) {
  double total = 0.0;
  for (int n = 0; n < N; ++n) {
    Eigen::Map<Eigen::ArrayXf> z(logits + static_cast<long>(n) * V, V);  // (V)
    const int y = targets[n];
    const float m = z.maxCoeff(), zy = z[y];
    z = (z - m).exp();  // one exp pass, in place (the same with or without backward)
    const float sum = z.sum();
    if (backward) {  // rescale into dloss·softmax(z) - dloss·onehot(y)
      z *= dloss / sum;
      z[y] -= dloss;
    }
    // loss = logsumexp(z) - z_y, in double: a difference of two O(ln V) numbers.
    total += static_cast<double>(m) + std::log(static_cast<double>(sum)) - zy;
  }
  return total;
}

}  // namespace cpu
}  // namespace llmp
