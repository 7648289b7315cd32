// Lab sequence_parallel_mlp: your implementation. Read README.md first, then
// sequence_parallel_mlp.h (the full spec); run the tests with
//     bazel test //labs/sequence_parallel_mlp:student_test
// They fail until the two functions below are done. Start from your tensor_parallel_mlp (or its
// spec): the matrix products are the same; what changes is what comes in, what goes out, and
// the collectives around them.
//
// What you may use: ProcessGroup::all_gather / reduce_scatter (common/comm/process_group.h),
// kernels/cpu matmul_forward / matmul_backward and gelu_forward / gelu_backward, Tensor::empty,
// LLMP_CHECK. What you may not: all_reduce, or any other communication (the tests count the
// calls and the bytes), or MPI directly.
//
// Glossary: t ranks, N rows, Nl = N/t this rank's rows, C channels, Fs = F/t.
#include "common/runtime/check.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/matmul.h"
#include "labs/sequence_parallel_mlp/sequence_parallel_mlp.h"

namespace llmp {

// TODO(lab sequence_parallel_mlp): the forward (spec: the header): all_gather x_s into x (N, C);
// h and a into the cache as in tensor_parallel_mlp; yp = a @ w_proj (N, C); reduce_scatter yp into
// y_s (Nl, C); add b_proj. Let the gathered x go before returning (do not keep it).
Tensor sp_mlp_forward(const Tensor& x_s, const TpMlpShard& shard, TpMlpCache& cache,
                      ProcessGroup& tp) {
  (void)x_s, (void)shard, (void)cache, (void)tp;  // TODO(lab sequence_parallel_mlp): remove
  return Tensor();
}

// TODO(lab sequence_parallel_mlp): the backward (spec: the header): db_proj from this rank's
// rows; all_gather dy_s; c_proj's and GELU's backward; all_gather x_s again for dw_fc; c_fc's
// backward into dxp (N, C); reduce_scatter dxp into dx_s (Nl, C).
Tensor sp_mlp_backward(const Tensor& dy_s, const Tensor& x_s, TpMlpShard& shard,
                       const TpMlpCache& cache, ProcessGroup& tp) {
  (void)dy_s, (void)x_s, (void)shard, (void)cache, (void)tp;  // TODO(lab sequence_parallel_mlp)
  return Tensor();
}

}  // namespace llmp
