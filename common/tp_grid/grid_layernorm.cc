// grid_layernorm (see grid_layernorm.h).
#include "common/tp_grid/grid_layernorm.h"

#include <Eigen/Core>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/layernorm.h"

namespace llmp {
namespace {
using Arr = Eigen::Map<Eigen::ArrayXf>;
using CArr = Eigen::Map<const Eigen::ArrayXf>;

void check_cols(const ProcessGroup& group, int Cl, int C) {
  if (static_cast<int64_t>(Cl) * group.size() != C)
    throw std::invalid_argument("grid_layernorm: " + std::to_string(Cl) + " columns on each of " +
                                std::to_string(group.size()) + " ranks do not make C=" +
                                std::to_string(C));
}
}  // namespace

void grid_layernorm_forward(ProcessGroup& group, float* y, float* mean, float* rstd,
                            const float* x, const float* w, const float* b, int64_t N, int Cl,
                            int C) {
  check_cols(group, Cl, C);
  Tensor s = Tensor::empty({N}, DType::kF32, MemCategory::kCommBuffers);
  float* sp = s.f32();
  for (int64_t n = 0; n < N; ++n) sp[n] = CArr(x + n * Cl, Cl).sum();  // partial Σ_c x_c
  group.all_reduce(s, ReduceOp::kSum);  // whole-row sums: sends 2(n-1)/n·4N
  Tensor m = Tensor::empty({N}, DType::kF32, MemCategory::kCommBuffers);
  float* mp = m.f32();
  for (int64_t n = 0; n < N; ++n) {
    mp[n] = sp[n] / C;
    sp[n] = (CArr(x + n * Cl, Cl) - mp[n]).square().sum();  // partial Σ_c (x_c - mean)²
  }
  group.all_reduce(s, ReduceOp::kSum);  // whole-row squared deviations: sends 2(n-1)/n·4N
  CArr W(w, Cl), Bv(b, Cl);
  for (int64_t n = 0; n < N; ++n) {
    const float r = 1.0f / std::sqrt(sp[n] / C + cpu::kLayerNormEps);
    Arr(y + n * Cl, Cl) = (CArr(x + n * Cl, Cl) - mp[n]) * (r * W) + Bv;
    if (mean) mean[n] = mp[n];
    if (rstd) rstd[n] = r;
  }
}

void grid_layernorm_backward(ProcessGroup& group, float* dx, float* dw, float* db, const float* dy,
                             const float* x, const float* w, const float* mean, const float* rstd,
                             int64_t N, int Cl, int C) {
  check_cols(group, Cl, C);
  CArr W(w, Cl);
  Tensor s = Tensor::empty({2 * N}, DType::kF32, MemCategory::kCommBuffers);
  float* sp = s.f32();
  Eigen::ArrayXf xhat(Cl), dxhat(Cl);
  for (int64_t n = 0; n < N; ++n) {
    xhat = (CArr(x + n * Cl, Cl) - mean[n]) * rstd[n];
    dxhat = CArr(dy + n * Cl, Cl) * W;
    sp[n] = dxhat.sum();               // partial Σ_c dx̂_c
    sp[N + n] = (dxhat * xhat).sum();  // partial Σ_c dx̂_c·x̂_c
  }
  group.all_reduce(s, ReduceOp::kSum);  // sends 2(n-1)/n·8N
  for (int64_t n = 0; n < N; ++n) {
    xhat = (CArr(x + n * Cl, Cl) - mean[n]) * rstd[n];
    dxhat = CArr(dy + n * Cl, Cl) * W;
    const float mean_d = sp[n] / C, mean_dx = sp[N + n] / C;
    Arr(dx + n * Cl, Cl) += rstd[n] * (dxhat - mean_d - xhat * mean_dx);
  }
  if (dw) cpu::layernorm_backward_weight(dw, db, dy, x, mean, rstd, static_cast<int>(N), Cl);
}

}  // namespace llmp
