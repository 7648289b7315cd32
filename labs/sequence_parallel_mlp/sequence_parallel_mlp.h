// Lab sequence_parallel_mlp: the adapter header. The tests call sp_mlp_forward() and
// sp_mlp_backward() and nothing else, so you may organise your code as you like behind them. Do
// labs/tensor_parallel_mlp first: the same MLP, the same shard, other collectives around it.
//
// Megatron's sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in
// Large Transformer Models", §4.2.2, Fig. 5). Tensor parallelism splits the MLP's matrices, but
// the tensors between the blocks (the residual stream, the LayerNorms and dropouts on it) are
// replicated: every rank holds all N rows of (N, C). Sequence parallelism splits them by rows
// (tokens) instead: rank r holds rows [r·N/t, (r+1)·N/t). The MLP still needs every row, so
// Megatron's f and g change:
//   f  (before c_fc)   all_gather of the rows in the forward, reduce_scatter in the backward
//   g  (after c_proj)  reduce_scatter of the partial sums in the forward, all_gather backward
// An all_reduce is a reduce_scatter followed by an all_gather, so the bytes are those of tensor
// parallelism's two all_reduces, while every tensor outside the MLP is 1/t the size.
//
// Glossary: t = tp.size() ranks, r = tp.rank(), N rows (tokens; a multiple of t), Nl = N/t this
// rank's rows, C channels, F hidden width (a multiple of t), Fs = F/t. The shard is
// tensor_parallel_mlp's (tp_mlp_shard.h): w_fc (C, Fs), b_fc (Fs), w_proj (Fs, C), b_proj (C).
#pragma once

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"
#include "labs/tensor_parallel_mlp/tp_mlp_shard.h"  // TpMlpShard, TpMlpCache

namespace llmp {

/// Forward. x_s: (Nl, C) host f32, this rank's rows [r·Nl, (r+1)·Nl) of x; not modified.
/// Returns y_s (Nl, C), a new tensor: this rank's rows of y = gelu(x @ W_fc + b_fc) @ W_proj +
/// b_proj (the dense MLP, up to float rounding), computed as
///   x   = all_gather(x_s)                     (N, C): every rank's rows, in rank order
///   h   = x @ w_fc + b_fc                     (N, Fs), kept in cache.h
///   a   = gelu(h)                             (N, Fs), kept in cache.a
///   yp  = a @ w_proj                          (N, C), this rank's partial sums of every row
///   y_s = reduce_scatter(yp) + b_proj         (Nl, C): the sum of every rank's partial sums of
///                                             this rank's rows, then the bias once
/// cache: filled with h and a (new kActivations tensors). The gathered x is NOT kept: backward
/// gathers it again (Megatron does the same, overlapping that all_gather with compute), so
/// after forward returns this call holds 4·(Nl·C + 2·N·Fs) bytes more than before: y_s and the
/// cache, nothing else (the tests measure it with the MemoryTracker).
/// Traffic: one all_gather (N·C floats out) and one reduce_scatter (N·C floats in), each
/// (t−1)/t·4NC bytes per rank; nothing else. Collective over tp.
/// Errors: shapes that do not fit (x_s (Nl, C), w_fc (C, Fs), b_fc (Fs), w_proj (Fs, C),
/// b_proj (C)) end every rank with LLMP_CHECK naming them.
Tensor sp_mlp_forward(const Tensor& x_s, const TpMlpShard& shard, TpMlpCache& cache,
                      ProcessGroup& tp);

/// Backward of sp_mlp_forward, given dy_s = dL/dy for this rank's rows (Nl, C). Returns dx_s
/// (Nl, C), a new tensor: this rank's rows of the full dL/dx. ACCUMULATES (+=) into the shard:
///   db_proj += Σ_rows dy_s                    (C): this rank's rows' part (the sum over the
///                                             ranks is the full gradient; Megatron all-reduces
///                                             such sequence-parallel gradients before the step)
///   dy       = all_gather(dy_s)               (N, C)
///   dw_proj += aᵀ @ dy,  da = dy @ w_projᵀ   (Fs, C), (N, Fs)
///   dh       = gelu'(h) · da
///   x        = all_gather(x_s)                (N, C) again
///   dw_fc   += xᵀ @ dh,  db_fc += Σ_rows dh  (C, Fs), (Fs)
///   dxp      = dh @ w_fcᵀ                     (N, C), this rank's part of every row
///   dx_s     = reduce_scatter(dxp)            (Nl, C)
/// x_s: the tensor passed to sp_mlp_forward; cache: as sp_mlp_forward left it.
/// Traffic: two all_gathers and one reduce_scatter of N·C floats, each (t−1)/t·4NC bytes per
/// rank; nothing else. Collective over tp.
/// Errors: dy_s not x_s's shape ends every rank with LLMP_CHECK naming both.
Tensor sp_mlp_backward(const Tensor& dy_s, const Tensor& x_s, TpMlpShard& shard,
                       const TpMlpCache& cache, ProcessGroup& tp);

}  // namespace llmp
