// The 2D / 2.5D tensor-parallel walk's kernels (see tp_grid.h): Eigen row maps, one row at a time.
#include "kernels/cpu/tp_grid.h"

#include <Eigen/Core>
#include <cmath>

#include "kernels/cpu/layernorm.h"

namespace llmp {
namespace cpu {
namespace {

using Arr = Eigen::Map<Eigen::ArrayXf>;
using CArr = Eigen::Map<const Eigen::ArrayXf>;

}  // namespace

void add_to(float* y, const float* x, int64_t n) {
  for (int64_t e = 0; e < n; ++e) y[e] += x[e];
}

void bias_add(float* y, const float* b, long N, int C) {
  for (long n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) y[n * C + c] += b[c];
}

void layernorm_partial_sum(float* s, const float* x, long N, int Cl) {
  for (long n = 0; n < N; ++n) s[n] = CArr(x + n * Cl, Cl).sum();
}

void layernorm_partial_sq(float* mean, float* s, const float* x, long N, int Cl, int C) {
  for (long n = 0; n < N; ++n) {
    mean[n] = s[n] / C;
    s[n] = (CArr(x + n * Cl, Cl) - mean[n]).square().sum();
  }
}

void layernorm_normalize(float* y, float* mean_out, float* rstd_out, const float* x,
                         const float* w, const float* b, const float* mean, const float* s,
                         long N, int Cl, int C) {
  CArr W(w, Cl), Bv(b, Cl);
  for (long n = 0; n < N; ++n) {
    const float r = 1.0f / std::sqrt(s[n] / C + kLayerNormEps);
    Arr(y + n * Cl, Cl) = (CArr(x + n * Cl, Cl) - mean[n]) * (r * W) + Bv;
    if (mean_out) mean_out[n] = mean[n];
    if (rstd_out) rstd_out[n] = r;
  }
}

void layernorm_backward_partial(float* s, const float* dy, const float* x, const float* w,
                                const float* mean, const float* rstd, long N, int Cl) {
  CArr W(w, Cl);
  Eigen::ArrayXf xhat(Cl), dxhat(Cl);
  for (long n = 0; n < N; ++n) {
    xhat = (CArr(x + n * Cl, Cl) - mean[n]) * rstd[n];
    dxhat = CArr(dy + n * Cl, Cl) * W;
    s[n] = dxhat.sum();               // partial Σ_c dx̂_c
    s[N + n] = (dxhat * xhat).sum();  // partial Σ_c dx̂_c·x̂_c
  }
}

void layernorm_backward_apply(float* dx, const float* s, const float* dy, const float* x,
                              const float* w, const float* mean, const float* rstd, long N,
                              int Cl, int C) {
  CArr W(w, Cl);
  Eigen::ArrayXf xhat(Cl), dxhat(Cl);
  for (long n = 0; n < N; ++n) {
    xhat = (CArr(x + n * Cl, Cl) - mean[n]) * rstd[n];
    dxhat = CArr(dy + n * Cl, Cl) * W;
    const float mean_d = s[n] / C, mean_dx = s[N + n] / C;
    Arr(dx + n * Cl, Cl) += rstd[n] * (dxhat - mean_d - xhat * mean_dx);
  }
}

}  // namespace cpu
}  // namespace llmp
