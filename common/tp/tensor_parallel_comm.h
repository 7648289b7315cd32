// TensorParallelComm: the model's TpComm (common/nn/tp_comm.h) over a tensor-parallel
// ProcessGroup, made of Megatron's region operators (mappings.h).
//
//   point of the block      tensor parallelism (Megatron-LM §3)   sequence parallelism (§4.2.2 of
//                                                                  Korthikanti et al. 2022)
//   enter (before c_attn,   f = CopyToTpRegion                    GatherFromSequenceRegion
//   c_fc, the LM head)      fwd identity, bwd all_reduce           fwd all_gather, bwd reduce_scatter
//   exit (after c_proj,     g = ReduceFromTpRegion                ReduceScatterToSequenceRegion
//   the embedding)          fwd all_reduce, bwd identity           fwd reduce_scatter, bwd all_gather
//   regather (W of c_attn,  identity (the input was kept whole)   all_gather of the kept (B,T/t,C)
//   c_fc)                                                          LayerNorm output, on `regather`
//   checkpoint (ZeRO-R Pa:  keep 1/t of a recomputed block's      identity (the input is already
//   full recomputation)     input; all_gather it on `checkpoints`  split: SP does Pa's job)
//                           before the recomputation
//
// Per rank and call, S = B·T·C·4 bytes: all_reduce 2(t-1)/t·S; all_gather, reduce_scatter
// (t-1)/t·S, so a sequence-parallel pair sends exactly what the all_reduce it replaces does. The
// re-gather goes over a group of its own so that its bytes are counted apart (the paper stores
// only the rank's rows of the LayerNorm outputs and all-gathers them again in the backward: the
// price of its lower activation memory).
//
// On a device (--device cuda) every tensor passed and made here is device memory (Pa's parts and
// gathered checkpoints on the input's device); the collectives take them as they are.
//
// Glossary: t tensor-parallel ranks, B batch, T sequence, C channels, S bytes of a (B,T,C) tensor.
#pragma once

#include "common/comm/process_group.h"
#include "common/nn/tp_comm.h"

namespace llmp {

class TensorParallelComm : public TpComm {
 public:
  /// `tp`, `regather` (used only with sequence_parallel; nullptr = tp) and `checkpoints` (Pa's
  /// all_gathers; nullptr = tp) must outlive this.
  TensorParallelComm(ProcessGroup& tp, bool sequence_parallel, ProcessGroup* regather = nullptr,
                     ProcessGroup* checkpoints = nullptr);

  int size() const override { return tp_.size(); }
  int rank() const override { return tp_.rank(); }
  int seq_shards() const override { return sp_ ? tp_.size() : 1; }
  Tensor enter_forward(const Tensor& x) override;
  Tensor enter_backward(Tensor d) override;
  Tensor exit_forward(Tensor y) override;
  Tensor exit_backward(const Tensor& dy) override;
  Tensor regather(const Tensor& x) override;
  Tensor partition_checkpoint(const Tensor& x) override;
  /// sends (t-1)/t·4·n bytes (n = the whole checkpoint's elements), on `checkpoints`.
  Tensor gather_checkpoint(const Tensor& part, const std::vector<int64_t>& shape) override;
  void all_reduce_max(Tensor& t) override;  ///< sends 2(t-1)/t·4·numel
  void all_reduce_sum(Tensor& t) override;  ///< sends 2(t-1)/t·4·numel

 private:
  ProcessGroup& tp_;
  bool sp_;
  ProcessGroup& regather_;
  ProcessGroup& checkpoints_;
};

}  // namespace llmp
