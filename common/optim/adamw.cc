#include "common/optim/adamw.h"

#include <cmath>

namespace llmp {

AdamW::AdamW(int64_t n, AdamWConfig cfg)
    : n_(n),
      cfg_(cfg),
      m_(Tensor::zeros({n}, DType::kF32, MemCategory::kOptimizerState)),
      v_(Tensor::zeros({n}, DType::kF32, MemCategory::kOptimizerState)) {}

void AdamW::step(float* params, const float* grads, int64_t t, int64_t n) {
  if (n < 0 || n > n_) n = n_;
  const float b1 = cfg_.beta1, b2 = cfg_.beta2;
  const float c1 = 1.0f / (1.0f - static_cast<float>(std::pow(b1, t)));  // bias corrections
  const float c2 = 1.0f / (1.0f - static_cast<float>(std::pow(b2, t)));
  const float lr = cfg_.lr, eps = cfg_.eps, wd = cfg_.weight_decay;
  float* m = m_.f32();
  float* v = v_.f32();
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    const float m_hat = m[i] * c1, v_hat = v[i] * c2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + wd * params[i]);
  }
}

}  // namespace llmp
