// grid_layernorm (see grid_layernorm.h): the passes are kernels/cpu/tp_grid.h's, through
// kernel_ops(device); the all_reduces of the partial row sums sit between them.
#include "common/tp_grid/grid_layernorm.h"

#include <stdexcept>
#include <string>

#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

void check_cols(const ProcessGroup& group, int Cl, int C) {
  if (static_cast<int64_t>(Cl) * group.size() != C)
    throw std::invalid_argument("grid_layernorm: " + std::to_string(Cl) + " columns on each of " +
                                std::to_string(group.size()) + " ranks do not make C=" +
                                std::to_string(C));
}

Tensor buffer(int64_t n, Device d) {
  return Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers, d);
}

}  // namespace

void grid_layernorm_forward(ProcessGroup& group, float* y, float* mean, float* rstd,
                            const float* x, const float* w, const float* b, int64_t N, int Cl,
                            int C, Device device) {
  check_cols(group, Cl, C);
  KernelOps& ops = kernel_ops(device);
  Tensor s = buffer(N, device), m = buffer(N, device);
  ops.layernorm_partial_sum(s.f32(), x, N, Cl);           // partial Σ_c x_c
  group.all_reduce(s, ReduceOp::kSum);                    // whole-row sums: sends 2(n-1)/n·4N
  ops.layernorm_partial_sq(m.f32(), s.f32(), x, N, Cl, C);  // mean; partial Σ_c (x_c - mean)²
  group.all_reduce(s, ReduceOp::kSum);  // whole-row squared deviations: sends 2(n-1)/n·4N
  ops.layernorm_normalize(y, mean, rstd, x, w, b, m.f32(), s.f32(), N, Cl, C);
}

void grid_layernorm_backward(ProcessGroup& group, float* dx, float* dw, float* db, const float* dy,
                             const float* x, const float* w, const float* mean, const float* rstd,
                             int64_t N, int Cl, int C, Device device) {
  check_cols(group, Cl, C);
  KernelOps& ops = kernel_ops(device);
  Tensor s = buffer(2 * N, device);
  ops.layernorm_backward_partial(s.f32(), dy, x, w, mean, rstd, N, Cl);  // [Σ dx̂ | Σ dx̂·x̂]
  group.all_reduce(s, ReduceOp::kSum);                                    // sends 2(n-1)/n·8N
  ops.layernorm_backward_apply(dx, s.f32(), dy, x, w, mean, rstd, N, Cl, C);
  if (dw) ops.layernorm_backward_weight(dw, db, dy, x, mean, rstd, static_cast<int>(N), Cl);
}

}  // namespace llmp
