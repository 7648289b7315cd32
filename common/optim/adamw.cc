#include "common/optim/adamw.h"

#include <cmath>
#include <stdexcept>

namespace llmp {

const char* decay_rule_name(DecayRule r) { return r == DecayRule::kAll ? "all" : "dim>=2"; }

AdamW::AdamW(int64_t n, AdamWConfig cfg, std::vector<ElementRange> decay)
    : n_(n),
      cfg_(cfg),
      decay_(std::move(decay)),
      m_(Tensor::zeros({n}, DType::kF32, MemCategory::kOptimizerState)),
      v_(Tensor::zeros({n}, DType::kF32, MemCategory::kOptimizerState)) {
  int64_t prev = 0;
  for (const ElementRange& r : decay_)
    if (r.begin < prev || r.end < r.begin || r.end > n)
      throw std::invalid_argument("AdamW decay range [" + std::to_string(r.begin) + ", " +
                                  std::to_string(r.end) + ") is unsorted, overlaps or leaves [0, " +
                                  std::to_string(n) + ")");
    else
      prev = r.end;
}

void AdamW::step(float* params, const float* grads, int64_t t, int64_t n) {
  if (n < 0 || n > n_) n = n_;
  const float b1 = cfg_.beta1, b2 = cfg_.beta2;
  const float c1 = 1.0f / (1.0f - static_cast<float>(std::pow(b1, t)));  // bias corrections
  const float c2 = 1.0f / (1.0f - static_cast<float>(std::pow(b2, t)));
  const float lr = cfg_.lr, eps = cfg_.eps;
  float* m = m_.f32();
  float* v = v_.f32();
  size_t k = 0;  // the first decay range that does not end before element i
  for (int64_t i = 0; i < n; ++i) {
    while (k < decay_.size() && decay_[k].end <= i) ++k;
    const float wd = k < decay_.size() && decay_[k].begin <= i ? cfg_.weight_decay : 0.0f;
    const float g = grads[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    const float m_hat = m[i] * c1, v_hat = v[i] * c2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + wd * params[i]);
  }
}

}  // namespace llmp
