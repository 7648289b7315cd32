// The AdamW element update (adamw.h).
#include "kernels/cpu/adamw.h"

#include <cmath>

namespace llmp {
namespace cpu {

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float c1, float c2) {
  for (int64_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    const float m_hat = m[i] * c1, v_hat = v[i] * c2;
    p[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * p[i]);
  }
}

}  // namespace cpu
}  // namespace llmp
