// Tensor-parallel region operators: the conjugate pairs Megatron-LM puts at the edges of a
// tensor-parallel region (Shoeybi et al. 2019, "Megatron-LM", §3, Fig. 3: "f" and "g"), their
// slicing cousins, and the sequence-parallel pair (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", §4.2.2: "g" and "ḡ").
//
// There is no autograd here: each operator is a struct with two static functions, `forward` and
// `backward`, and the backward of one is the collective that is the forward's adjoint. A layer
// calls the forward on its way in or out of the region and the backward, in reverse order, on the
// way back. The pairs, in Megatron-Core's names (megatron/core/tensor_parallel/mappings.py):
//
//   operator                       forward               backward              bytes fwd | bwd
//   CopyToTpRegion          (f)    identity              all_reduce (sum)      0 | 2(t-1)/t·S
//   ReduceFromTpRegion      (g)    all_reduce (sum)      identity              2(t-1)/t·S | 0
//   ScatterToTpRegion              keep slice r, last    all_gather, last      0 | (t-1)/t·S
//   GatherFromTpRegion             all_gather, last      keep slice r, last    (t-1)/t·S | 0
//   GatherFromSequenceRegion       all_gather, seq.      reduce_scatter, seq.  (t-1)/t·S each
//   ReduceScatterToSequenceRegion  reduce_scatter, seq.  all_gather, seq.      (t-1)/t·S each
// ("last": the last dimension; "seq.": the sequence dimension of (B, T, C).)
//
// The bytes are what `tp.stats()` counts per rank (common/comm/process_group.h): S is the size of
// the full (un-sliced) tensor, and a group of one rank counts 0, so on t = 1 every operator is the
// identity and sends nothing.
//
// Tensors: f32 (or bf16 / f16 under mixed precision, the results in the input's dtype),
// contiguous, on the host or a device (--device cuda: the collectives get the device tensors and
// the MPI backend stages them through host buffers, process_group_staging.h).
// Tensors these functions create are on their input's device, counted as
// MemCategory::kActivations (the rank-major staging buffer of a sequence collective, freed before
// returning, as kCommBuffers).
//
// Glossary: t = tp.size() ranks in the tensor-parallel group, r = tp.rank(), K the last dimension
// of a full tensor (K/t on a rank), B batch, T sequence length, C channels, S bytes of the full
// tensor (4 bytes per element).
#pragma once

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp::tp {

/// Megatron's f (Shoeybi et al. 2019, §3): enters a tensor-parallel region whose input is
/// replicated, e.g. before a column-parallel linear layer.
///  - forward: identity. Returns `x` itself (the same storage, no copy); sends 0 bytes.
///  - backward: all_reduce (sum) of `dy` over `tp`, in place: every rank's partial gradient of
///    the replicated input becomes the full one. Returns `dy` (its own storage, summed); sends
///    2(t-1)/t·S, S = dy.nbytes().
/// Any shape. Errors (LLMP_CHECK, ends every rank): a tensor not f32, bf16 or f16.
struct CopyToTpRegion {
  static Tensor forward(const Tensor& x, ProcessGroup& tp);
  static Tensor backward(Tensor dy, ProcessGroup& tp);
};

/// Megatron's g (Shoeybi et al. 2019, §3): leaves a tensor-parallel region whose ranks hold
/// partial sums, e.g. after a row-parallel linear layer.
///  - forward: all_reduce (sum) of `x` over `tp`, in place. Returns `x` (its own storage, summed);
///    sends 2(t-1)/t·S, S = x.nbytes().
///  - backward: identity. Returns `dy` itself (no copy); sends 0 bytes: the gradient of a sum with
///    respect to each addend is the gradient of the sum.
/// Any shape. Errors (LLMP_CHECK, ends every rank): a tensor not f32, bf16 or f16.
struct ReduceFromTpRegion {
  static Tensor forward(Tensor x, ProcessGroup& tp);
  static Tensor backward(const Tensor& dy, ProcessGroup& tp);
};

/// Splits the last dimension across the group (Megatron's scatter_to_tensor_model_parallel_region).
///  - forward: x (..., K), replicated -> (..., K/t), a new tensor holding this rank's slice
///    [r·K/t, (r+1)·K/t) of every row; sends 0 bytes.
///  - backward: all_gather along the last dimension, dy (..., K/t) -> (..., K), slice q from rank
///    q; sends (t-1)/t·S, S = bytes of the (..., K) result.
/// Errors (LLMP_CHECK): ndim 0, forward's K not divisible by t, a tensor not f32, bf16 or f16.
struct ScatterToTpRegion {
  static Tensor forward(const Tensor& x, ProcessGroup& tp);
  static Tensor backward(const Tensor& dy, ProcessGroup& tp);
};

/// Joins the last dimension across the group (Megatron's gather_from_tensor_model_parallel_region).
///  - forward: all_gather along the last dimension, x (..., K/t) -> (..., K), a new tensor, slice q
///    from rank q; sends (t-1)/t·S, S = bytes of the (..., K) result.
///  - backward: dy (..., K) -> (..., K/t), a new tensor holding this rank's slice; sends 0 bytes.
/// Errors (LLMP_CHECK): ndim 0, backward's K not divisible by t, a tensor not f32, bf16 or f16.
struct GatherFromTpRegion {
  static Tensor forward(const Tensor& x, ProcessGroup& tp);
  static Tensor backward(const Tensor& dy, ProcessGroup& tp);
};

/// Sequence parallelism (Korthikanti et al. 2022, §4.2.2: "g", before a tensor-parallel block).
/// Activations are (B, T, C) row-major; rank r holds positions [r·T/t, (r+1)·T/t) of EVERY
/// sequence, a (B, T/t, C) tensor.
///  - forward: all_gather along the sequence, x (B, T/t, C) -> (B, T, C), a new tensor; sends
///    (t-1)/t·S, S = bytes of the (B, T, C) result.
///  - backward: reduce_scatter (sum) along the sequence, dy (B, T, C) -> (B, T/t, C), a new
///    tensor: the sum over ranks of their dy at this rank's positions; sends (t-1)/t·S,
///    S = dy.nbytes().
/// A flat all_gather leaves its output rank-major, (t, B, T/t, C); forward permutes it to
/// (B, T, C), and backward permutes dy to (t, B, T/t, C) before the flat reduce_scatter. (Megatron
/// keeps activations (T, B, C), sequence first, so that its gathers need no permute; here B = 1
/// needs none either.) Errors (LLMP_CHECK): ndim != 3, backward's T not divisible by t, a tensor
/// not f32.
struct GatherFromSequenceRegion {
  static Tensor forward(const Tensor& x, ProcessGroup& tp);
  static Tensor backward(const Tensor& dy, ProcessGroup& tp);
};

/// Sequence parallelism (Korthikanti et al. 2022, §4.2.2: "ḡ", after a tensor-parallel block whose
/// ranks hold partial sums): the adjoint of GatherFromSequenceRegion. Layout as there.
///  - forward: reduce_scatter (sum) along the sequence, x (B, T, C) -> (B, T/t, C), a new tensor;
///    sends (t-1)/t·S, S = x.nbytes().
///  - backward: all_gather along the sequence, dy (B, T/t, C) -> (B, T, C), a new tensor; sends
///    (t-1)/t·S, S = bytes of the (B, T, C) result.
/// Errors (LLMP_CHECK): ndim != 3, forward's T not divisible by t, a tensor not f32, bf16 or f16.
struct ReduceScatterToSequenceRegion {
  static Tensor forward(const Tensor& x, ProcessGroup& tp);
  static Tensor backward(const Tensor& dy, ProcessGroup& tp);
};

}  // namespace llmp::tp
