// LayerNorm forward/backward (see layernorm.h). Row loops call Eigen array expressions on Maps so
// that the reductions (sums over C) and the element-wise parts are vectorised (AVX2) without
// -ffast-math, which plain float loops would need before GCC reorders a sum.
#include "kernels/cpu/layernorm.h"

#include <Eigen/Core>
#include <cmath>

namespace llmp {
namespace cpu {
namespace {
using Arr = Eigen::Map<Eigen::ArrayXf>;
using CArr = Eigen::Map<const Eigen::ArrayXf>;
}  // namespace

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int N, int C) {
  CArr W(w, C), Bv(b, C);
  for (int n = 0; n < N; ++n) {
    CArr xr(x + static_cast<long>(n) * C, C);  // (C)
    const float m = xr.sum() / C;
    const float var = (xr - m).square().sum() / C;  // biased variance
    const float s = 1.0f / std::sqrt(var + kLayerNormEps);
    Arr(y + static_cast<long>(n) * C, C) = (xr - m) * (s * W) + Bv;  // (C)
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = s;
  }
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                        const float* w, const float* mean, const float* rstd, int N, int C) {
  CArr W(w, C);
  Eigen::ArrayXf xhat(C), dxhat(C);
  for (int n = 0; n < N; ++n) {
    const long o = static_cast<long>(n) * C;
    CArr xr(x + o, C), dyr(dy + o, C);
    xhat = (xr - mean[n]) * rstd[n];  // x̂ (C), recomputed rather than stored
    dxhat = dyr * W;                  // ∂L/∂x̂
    const float mean_d = dxhat.sum() / C;
    const float mean_dx = (dxhat * xhat).sum() / C;
    Arr(dx + o, C) += rstd[n] * (dxhat - mean_d - xhat * mean_dx);
  }
  if (dw) layernorm_backward_weight(dw, db, dy, x, mean, rstd, N, C);
}

void layernorm_backward_weight(float* dw, float* db, const float* dy, const float* x,
                               const float* mean, const float* rstd, int N, int C) {
  Arr dW(dw, C);
  Eigen::ArrayXf xhat(C);
  for (int n = 0; n < N; ++n) {
    const long o = static_cast<long>(n) * C;
    CArr xr(x + o, C), dyr(dy + o, C);
    xhat = (xr - mean[n]) * rstd[n];
    dW += dyr * xhat;
    if (db) Arr(db, C) += dyr;  // no bias gradient asked for: skipped, as the CUDA twin does
  }
}

}  // namespace cpu
}  // namespace llmp
