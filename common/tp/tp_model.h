// TpModel: a rank's tensor-parallel slice of the GPT and the groups it talks over, made before
// the strategy that trains it. The strategies inherit it first (base-from-member): their other
// base keeps a reference to the model (MixedPrecisionStrategy's MixedPrecision reads its dtype,
// PipelineStrategy walks it), so the model has to exist before that base is constructed.
//
// The slice (common/nn/gpt_layout.h, Shoeybi et al. 2019 §3): H/t heads, 4C/t MLP columns, V/t
// rows of wte, the LayerNorms, wpe and the row-parallel biases whole. Its TpComm is f and g over
// `tp` (Megatron-LM's column- and row-parallel regions) or, with sequence parallelism, their
// sequence-split pair (Korthikanti et al. 2022 §4.2.2); three duplicates of `tp` give the other
// kinds of traffic their own CommStats, so that each report row counts one kind.
//
// Used by TensorParallelStrategy (common/tp/tp_strategy.h) and hybrid_3d's HybridStrategy
// (stages/hybrid_3d/hybrid_3d.h). Glossary: t = tp.size(), H heads, C channels, V vocab.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/tp/tensor_parallel_comm.h"

namespace llmp {

struct TpModel {
  /// Collective over `tp` (three duplicate() calls). `act`: the activations' (and so the
  /// parameters') dtype, f32 or the 16-bit precision's; `device`: where the slice walks.
  /// Throws std::invalid_argument naming the values when t does not divide H, 4C or V.
  TpModel(const GPTConfig& cfg, ProcessGroup& tp, bool sequence_parallel, Device device,
          DType act);

  std::shared_ptr<ProcessGroup> regather_group;    ///< SP: ln_1/ln_2 outputs gathered again
  std::shared_ptr<ProcessGroup> grad_group;        ///< SP: the replicated gradients' all_reduce
  std::shared_ptr<ProcessGroup> checkpoint_group;  ///< ZeRO-R Pa: partitioned checkpoints
  std::unique_ptr<TensorParallelComm> comm;        ///< f and g (or SP's pair) over tp
  std::unique_ptr<GPT> slice;                      ///< this rank's slice of the GPT
};

/// Sequence parallelism's replicated gradients (Korthikanti et al. 2022, §4.2.2): each rank saw
/// only its T/t positions, so the gradients of the tensors every rank holds whole (LayerNorms,
/// wpe, the row-parallel biases) are summed over the group. The ranges (offset, numel) of `buf`
/// (any dtype, any device) are packed into one buffer beside it (copy_from of views: device to
/// device on a GPU), all-reduced over `g` (kSum: sends 2(|g|-1)/|g|·e·Σnumel bytes, e the
/// dtype's size) and unpacked into their places. Collective over `g`.
void all_reduce_packed(ProcessGroup& g, const Tensor& buf,
                       const std::vector<std::pair<int64_t, int64_t>>& ranges);

}  // namespace llmp
