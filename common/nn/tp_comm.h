// TpComm: the points where a tensor-parallel GPT talks to its tensor-parallel group, seen from
// the model. On one rank every point is the identity, which is what the baseline and the data-
// and pipeline-parallel stages run; a tensor-parallel stage passes an implementation over its
// group (common/tp/tp_comm_impl.h), and the same block code then runs on a rank's slice.
//
// Megatron-LM (Shoeybi et al. 2019, §3) names the two operators of a tensor-parallel block:
//   f  before a column-parallel linear layer   forward identity,   backward all_reduce
//   g  after a row-parallel linear layer       forward all_reduce, backward identity
// Sequence parallelism (Korthikanti et al. 2022, §4.2.2) keeps the residual stream split along
// the sequence between them, so that f becomes all_gather (backward reduce_scatter) and g becomes
// reduce_scatter (backward all_gather). The model calls these four points plus the two
// reductions of the vocab-parallel cross-entropy, and never a collective directly:
//
//   enter_forward   f / all_gather          (B, T/s, C) -> (B, T, C)
//   enter_backward  f's bwd / reduce_scatter (B, T, C) partial sums -> (B, T/s, C) summed
//   exit_forward    g / reduce_scatter      (B, T, C) partial sums -> (B, T/s, C) summed
//   exit_backward   g's bwd / all_gather     (B, T/s, C) -> (B, T, C)
//
// s = seq_shards(): 1 (every rank holds whole sequences: one rank, or plain tensor parallelism),
// t under sequence parallelism (rank r holds positions [r·T/t, (r+1)·T/t) of every sequence).
//
// Glossary: B batch, T sequence, C channels, t tensor-parallel ranks, s sequence shards.
#pragma once

#include <cstdint>
#include <vector>

#include "common/tensor/tensor.h"

namespace llmp {

class TpComm {
 public:
  virtual ~TpComm() = default;

  /// The one-rank TpComm: every operation is the identity and nothing is sent.
  static TpComm& none();

  /// t, the ranks of the tensor-parallel group (1: the whole model on this rank).
  virtual int size() const { return 1; }
  /// This rank's index r in [0, t).
  virtual int rank() const { return 0; }
  /// s: 1, or t under sequence parallelism (the residual stream is (B, T/t, C) per rank).
  virtual int seq_shards() const { return 1; }

  /// f: x (B,T/s,C) -> the whole (B,T,C) a column-parallel layer multiplies. Identity when s = 1
  /// (returns x itself).
  virtual Tensor enter_forward(const Tensor& x) { return x; }
  /// f's backward: d (B,T,C), this rank's partial input gradient -> (B,T/s,C) summed over ranks.
  virtual Tensor enter_backward(Tensor d) { return d; }
  /// g: y (B,T,C), this rank's partial output of a row-parallel layer -> (B,T/s,C) summed.
  virtual Tensor exit_forward(Tensor y) { return y; }
  /// g's backward: dy (B,T/s,C) -> (B,T,C).
  virtual Tensor exit_backward(const Tensor& dy) { return dy; }
  /// The whole (B,T,C) of an input kept split for the backward (sequence parallelism stores a
  /// LayerNorm's output as (B,T/s,C) and all-gathers it again for the weight gradient, §4.2.2).
  /// Identity when s = 1.
  virtual Tensor regather(const Tensor& x) { return x; }

  /// ZeRO-R's partitioned activation checkpoints, Pa (Rajbhandari et al. 2020, §6.1): a block
  /// input kept for recomputation (B,T,C), the same on every rank of the group, is kept as this
  /// rank's 1/t of it (elements [r·n/t, (r+1)·n/t) of the flattened tensor, shape (n/t)).
  /// Identity when t = 1 or under sequence parallelism (x is already this rank's rows alone).
  virtual Tensor partition_checkpoint(const Tensor& x) { return x; }
  /// The whole checkpoint of shape `shape` again from every rank's part (all_gather), right
  /// before its recomputation. Identity when partition_checkpoint was.
  virtual Tensor gather_checkpoint(const Tensor& part, const std::vector<int64_t>& shape) {
    (void)shape;
    return part;
  }

  /// Vocab-parallel cross-entropy: element-wise max of t over the group, in place (f32).
  virtual void all_reduce_max(Tensor& t) { (void)t; }
  /// Element-wise sum over the group, in place (f32).
  virtual void all_reduce_sum(Tensor& t) { (void)t; }
};

}  // namespace llmp
