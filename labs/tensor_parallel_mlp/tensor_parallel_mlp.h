// Lab tensor_parallel_mlp: the adapter header. The tests call tp_mlp_forward() and
// tp_mlp_backward() and nothing else, so you may organise your code as you like behind them.
//
// Megatron-LM's tensor-parallel MLP (Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion
// Parameter Language Models Using Model Parallelism", §3, Fig. 3a): the GPT block's MLP,
//   y = gelu(x @ W_fc + b_fc) @ W_proj + b_proj,
// split over the t ranks of a tensor-parallel group. c_fc is column-parallel (rank r holds columns
// [r·F/t, (r+1)·F/t) of W_fc and the same slice of b_fc), GELU is applied locally to those
// columns, c_proj is row-parallel (rank r holds rows [r·F/t, (r+1)·F/t) of W_proj), so each rank
// ends with a partial sum of y that one all_reduce completes. Megatron's f (identity forward,
// all_reduce backward) sits before c_fc, its g (all_reduce forward, identity backward) after
// c_proj: common/tp/mappings.h has both.
//
// Glossary: t = tp.size() ranks, r = tp.rank(), N rows (tokens, B·T), C channels, F hidden width
// of the MLP (4C in GPT-2; any multiple of t here), F/t this rank's share of it. Weights are stored
// (in, out) row-major, a linear layer being y = x @ W + b (kernels/cpu/matmul.h).
#pragma once

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"
#include "labs/tensor_parallel_mlp/tp_mlp_shard.h"  // TpMlpShard, TpMlpCache

namespace llmp {

/// Forward of the tensor-parallel MLP. Returns y (N, C), a new tensor, the same on every rank:
///   y = gelu(x @ W_fc + b_fc) @ W_proj + b_proj     (the dense MLP, up to float rounding)
/// computed as
///   x  = f(x)                                 identity (CopyToTpRegion::forward)
///   h  = x @ w_fc + b_fc                      (N, C) @ (C, F/t) + (F/t) -> (N, F/t)
///   a  = gelu(h)                              local, tanh approximation (kernels/cpu/gelu.h)
///   yp = a @ w_proj                           (N, F/t) @ (F/t, C) -> (N, C), a partial sum
///   y  = g(yp) + b_proj                       all_reduce (ReduceFromTpRegion::forward), then the
///                                             bias, ONCE, after the sum
///
/// x: (N, C), host f32, the same on every rank (replicated); not modified.
/// Collective: every rank of `tp` calls it with the same N and C.
/// Traffic: exactly one all_reduce of N·C floats: 2(t-1)/t·4NC bytes per rank (tp.stats()), 0 on
/// one rank; no other communication.
/// Errors: shapes that do not fit each other (x (N, C), w_fc (C, F/t), b_fc (F/t), w_proj
/// (F/t, C), b_proj (C)) end every rank with LLMP_CHECK naming them.
Tensor tp_mlp_forward(const Tensor& x, const TpMlpShard& shard, TpMlpCache& cache,
                      ProcessGroup& tp);

/// Backward of tp_mlp_forward, given dy = dL/dy (N, C), replicated. Returns dx = dL/dx (N, C), a
/// new tensor, the full gradient, the same on every rank, and ACCUMULATES (+=) this rank's shard
/// of the gradients into shard.dw_fc, db_fc, dw_proj, db_proj:
///   db_proj += Σ_rows dy                     (C): the full gradient (dy is replicated)
///   dyp      = g'(dy) = dy                   identity (ReduceFromTpRegion::backward)
///   dw_proj += aᵀ @ dy                       (F/t, N) @ (N, C) -> (F/t, C)
///   da       = dy @ w_projᵀ                  (N, C) @ (C, F/t) -> (N, F/t)
///   dh       = gelu'(h) · da                 elementwise
///   dw_fc   += xᵀ @ dh                       (C, N) @ (N, F/t) -> (C, F/t)
///   db_fc   += Σ_rows dh                     (F/t)
///   dxp      = dh @ w_fcᵀ                    (N, F/t) @ (F/t, C) -> (N, C), this rank's part
///   dx       = f'(dxp)                       all_reduce (CopyToTpRegion::backward): the sum of
///                                            every rank's part, the full dx
/// Each shard gradient equals the matching slice of the dense MLP's gradient (db_proj: all of it).
///
/// x: the same tensor passed to tp_mlp_forward; cache: as tp_mlp_forward left it.
/// Collective: every rank of `tp` calls it.
/// Traffic: exactly one all_reduce of N·C floats: 2(t-1)/t·4NC bytes per rank, 0 on one rank.
/// Errors: dy not (N, C) ends every rank with LLMP_CHECK naming both shapes.
Tensor tp_mlp_backward(const Tensor& dy, const Tensor& x, TpMlpShard& shard,
                       const TpMlpCache& cache, ProcessGroup& tp);

}  // namespace llmp
