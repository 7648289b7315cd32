// The shard of the tensor-parallel MLP (Megatron's c_fc column-parallel, c_proj row-parallel)
// and what its forward keeps for its backward: shared by the labs tensor_parallel_mlp and
// sequence_parallel_mlp, whose headers say what each function does with them.
//
// Glossary: t ranks, r this rank, N rows, C channels, F the MLP's hidden width, F/t this rank's
// share of it. Weights are (in, out) row-major: y = x @ W + b (kernels/cpu/matmul.h).
#pragma once

#include "common/tensor/tensor.h"

namespace llmp {

/// This rank's shard of the MLP: its parameters, read by forward and backward, and their
/// gradients, which backward ACCUMULATES into (+=; the caller zeroes them between steps). All host
/// f32, contiguous, Tensor handles (copying the struct shares the storage).
struct TpMlpShard {
  Tensor w_fc;    ///< (C, F/t)  columns [r·F/t, (r+1)·F/t) of the full W_fc (C, F)
  Tensor b_fc;    ///< (F/t)     elements [r·F/t, (r+1)·F/t) of the full b_fc (F)
  Tensor w_proj;  ///< (F/t, C)  rows [r·F/t, (r+1)·F/t) of the full W_proj (F, C)
  Tensor b_proj;  ///< (C)       the whole b_proj, replicated on every rank
  Tensor dw_fc;    ///< (C, F/t) gradient of w_fc, += by backward
  Tensor db_fc;    ///< (F/t)    gradient of b_fc, +=
  Tensor dw_proj;  ///< (F/t, C) gradient of w_proj, +=
  Tensor db_proj;  ///< (C)      gradient of b_proj, += (tensor_parallel_mlp: the full gradient,
                   ///<           the same on every rank; sequence_parallel_mlp: this rank's
                   ///<           rows' part)
};

/// What forward keeps for backward. Forward fills it (allocate the tensors there, as
/// MemCategory::kActivations); backward reads it. The tests never look inside.
struct TpMlpCache {
  Tensor h;  ///< (N, F/t) this rank's columns of x @ W_fc + b_fc, before GELU
  Tensor a;  ///< (N, F/t) gelu(h), the input of c_proj
};

}  // namespace llmp
