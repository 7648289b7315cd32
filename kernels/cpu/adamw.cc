// The AdamW element update (adamw.h).
#include "kernels/cpu/adamw.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace llmp {
namespace cpu {

int64_t span_of(const std::vector<DecayRun>& runs) {
  int64_t begin = 0;
  for (size_t k = 0; k < runs.size(); ++k) {
    if (runs[k].end <= begin)
      throw std::invalid_argument("AdamW run " + std::to_string(k) + " ends at " +
                                  std::to_string(runs[k].end) + ", not after its start " +
                                  std::to_string(begin));
    begin = runs[k].end;
  }
  return begin;
}

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float c1, float c2,
                  float grad_scale) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale;  // unscaled (1/S) and clipped; ·1 changes no bit
    m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
    v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    const float m_hat = m[i] * c1, v_hat = v[i] * c2;
    p[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * p[i]);
  }
}

void adamw_update_runs(float* p, const float* g, float* m, float* v,
                       const std::vector<DecayRun>& runs, const AdamWStep& s) {
  span_of(runs);
  int64_t e = 0;
  for (const DecayRun& r : runs) {
    adamw_update(p + e, g + e, m + e, v + e, r.end - e, s.lr, s.beta1, s.beta2, s.eps,
                 r.weight_decay, s.c1, s.c2, s.grad_scale);
    e = r.end;
  }
}

}  // namespace cpu
}  // namespace llmp
