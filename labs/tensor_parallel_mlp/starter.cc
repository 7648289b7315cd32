// Lab tensor_parallel_mlp: your implementation. Read README.md first, then tensor_parallel_mlp.h
// (the full spec); run the tests with
//     bazel test //labs/tensor_parallel_mlp:student_test
// They fail until tp_mlp_forward() and tp_mlp_backward() below are done. Add helpers here (or in
// new files, listed in BUILD's `starter` target) as you like; the tests only call these two.
//
// What you may use: common/tp/mappings.h (tp::CopyToTpRegion is Megatron's f,
// tp::ReduceFromTpRegion its g), kernels/cpu/matmul.h (matmul_forward / matmul_backward: y = x @ W
// + b with W stored (in, out); backward overwrites dx and ACCUMULATES into dW and db) and
// kernels/cpu/gelu.h (gelu_forward / gelu_backward, tanh approximation), Tensor::empty / zeros.
// What you may not: any communication besides f and g (the tests count the bytes: one all_reduce
// of N·C floats forward, one backward), or MPI directly.
//
// Glossary: t = tp.size() ranks, N rows, C channels, F hidden width, Fs = F/t this rank's share.
#include "common/runtime/check.h"
#include "common/tp/mappings.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/matmul.h"
#include "labs/tensor_parallel_mlp/tensor_parallel_mlp.h"

namespace llmp {

// TODO(lab tensor_parallel_mlp): the forward of Megatron's MLP on this rank's shard (spec:
// tensor_parallel_mlp.h). In short, with x (N, C) replicated:
//   - x = f(x)  (tp::CopyToTpRegion::forward: identity);
//   - cache.h = x @ shard.w_fc + shard.b_fc   (N, C) @ (C, Fs) -> (N, Fs), column-parallel;
//   - cache.a = gelu(cache.h)                 local: this rank holds whole columns of h;
//   - y = cache.a @ shard.w_proj              (N, Fs) @ (Fs, C) -> (N, C), row-parallel: a
//     partial sum, WITHOUT the bias;
//   - y = g(y)  (tp::ReduceFromTpRegion::forward: all_reduce), then add shard.b_proj once.
// Allocate cache.h, cache.a and y with MemCategory::kActivations.
Tensor tp_mlp_forward(const Tensor& x, const TpMlpShard& shard, TpMlpCache& cache,
                      ProcessGroup& tp) {
  (void)shard, (void)cache, (void)tp;  // TODO(lab tensor_parallel_mlp): remove, implement above.
  // Until then: zeros, which is not the MLP's output on any number of ranks.
  return Tensor::zeros(x.shape(), DType::kF32, MemCategory::kActivations);
}

// TODO(lab tensor_parallel_mlp): the backward (spec: tensor_parallel_mlp.h). Given dy (N, C),
// replicated, ACCUMULATE (+=) into the shard's gradients and return the full dx (N, C):
//   - shard.db_proj += Σ_rows dy              the bias is replicated, and so is dy;
//   - dy = g'(dy)  (tp::ReduceFromTpRegion::backward: identity);
//   - c_proj backward: da = dy @ w_projᵀ, shard.dw_proj += aᵀ @ dy;
//   - dh = gelu'(h) · da;
//   - c_fc backward: shard.dw_fc += xᵀ @ dh, shard.db_fc += Σ_rows dh, dx = dh @ w_fcᵀ: this
//     rank's part of dx only;
//   - dx = f'(dx)  (tp::CopyToTpRegion::backward: all_reduce): the full dx on every rank.
Tensor tp_mlp_backward(const Tensor& dy, const Tensor& x, TpMlpShard& shard,
                       const TpMlpCache& cache, ProcessGroup& tp) {
  (void)dy, (void)shard, (void)cache, (void)tp;  // TODO(lab tensor_parallel_mlp): remove.
  // Until then: dx = 0 and no gradient accumulated.
  return Tensor::zeros(x.shape(), DType::kF32, MemCategory::kActivations);
}

}  // namespace llmp
