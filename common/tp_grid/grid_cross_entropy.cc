// grid_cross_entropy (see grid_cross_entropy.h).
#include "common/tp_grid/grid_cross_entropy.h"

#include "kernels/ops/kernel_ops.h"

namespace llmp {

double grid_cross_entropy(ProcessGroup& group, float* z, const int32_t* y, int v0, int64_t N,
                          int Vr, float dloss, bool backward, Device device) {
  const int n = static_cast<int>(N);
  KernelOps& ops = kernel_ops(device);
  Tensor m = Tensor::empty({N}, DType::kF32, MemCategory::kCommBuffers, device);
  ops.cross_entropy_row_max(m.f32(), z, n, Vr);
  group.all_reduce(m, ReduceOp::kMax);  // the row maxima over the whole vocabulary
  Tensor sums = Tensor::empty({2 * N}, DType::kF32, MemCategory::kCommBuffers, device);
  ops.cross_entropy_exp_sums(sums.f32(), z, y, v0, n, Vr, m.f32());
  group.all_reduce(sums, ReduceOp::kSum);  // Σ exp and the target logit over the vocabulary
  return ops.cross_entropy_loss(z, y, v0, n, Vr, m.f32(), sums.f32(), dloss, backward,
                                DType::kF32);
}

}  // namespace llmp
