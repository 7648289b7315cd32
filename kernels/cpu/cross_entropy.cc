// Softmax cross-entropy in three steps (see cross_entropy.h). Per row: the max, one pass of
// Eigen's vectorised exp() summed, then (backward) the same exp() again, scaled into dloss·softmax
// minus dloss at the target and written over the logits. Forward-only and backward share every
// step, so the loss they return is bit for bit the same; on one rank the result is that of the
// fused kernel.
#include "kernels/cpu/cross_entropy.h"

#include <Eigen/Core>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace cpu {
namespace {
using Row = Eigen::Map<Eigen::ArrayXf>;
using ConstRow = Eigen::Map<const Eigen::ArrayXf>;
}  // namespace

void cross_entropy_row_max(float* m, const float* z, int N, int Vr) {
  for (int n = 0; n < N; ++n) m[n] = ConstRow(z + static_cast<long>(n) * Vr, Vr).maxCoeff();
}

void cross_entropy_exp_sums(float* sums, const float* z, const int32_t* y, int v0, int N, int Vr,
                            const float* m) {
  for (int n = 0; n < N; ++n) {
    ConstRow zr(z + static_cast<long>(n) * Vr, Vr);  // (Vr)
    const int local = y[n] - v0;                     // the target's row in this shard, if there
    sums[N + n] = (local >= 0 && local < Vr) ? zr[local] : 0.0f;
    sums[n] = (zr - m[n]).exp().sum();
  }
}

void cross_entropy_max_sums(float* m, float* sums, const float* z, const int32_t* y, int v0,
                            int N, int Vr) {
  cross_entropy_row_max(m, z, N, Vr);
  cross_entropy_exp_sums(sums, z, y, v0, N, Vr, m);
}

double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                          const float* sums, float dloss, bool backward, DType grad_dtype) {
  if (grad_dtype != DType::kF32 && grad_dtype != DType::kF16 && grad_dtype != DType::kBF16)
    throw std::invalid_argument(std::string("cpu::cross_entropy_loss: gradient dtype ") +
                                to_string(grad_dtype) + " is not f32, f16 or bf16");
  double total = 0.0;
  for (int n = 0; n < N; ++n) {
    const float s = sums[n], zy = sums[N + n];
    if (backward) {  // z ← dloss·exp(z - m)/s - dloss·onehot(y), as 16-bit values if asked
      float* row = z + static_cast<long>(n) * Vr;
      Row zr(row, Vr);
      zr = (zr - m[n]).exp() * (dloss / s);
      const int local = y[n] - v0;
      if (local >= 0 && local < Vr) zr[local] -= dloss;
      round_values(row, Vr, grad_dtype);
    }
    // loss = logsumexp(z) - z_y, in double: a difference of two O(ln V) numbers.
    total += static_cast<double>(m[n]) + std::log(static_cast<double>(s)) - zy;
  }
  return total;
}

}  // namespace cpu
}  // namespace llmp
