// TensorParallelStrategy: Megatron-LM's 1D tensor parallelism (Shoeybi et al. 2019, §3) and,
// with sequence_parallel, Megatron's sequence parallelism on top of it (Korthikanti et al. 2022,
// §4.2.2), as a Strategy (common/train/strategy.h). The stages tensor_parallel and
// sequence_parallel are this class with the flag off and on.
//
// Every rank of the tensor-parallel group reads the WHOLE global batch and runs the same GPT
// (common/nn) with a rank's shapes: H/t heads (c_attn split by columns, attn.c_proj by rows), an
// MLP of width 4C/t (c_fc by columns, mlp.c_proj by rows), V/t rows of the tied wte (vocab-parallel
// embedding and cross-entropy: no rank holds the (B,T,V) logits). Its TpComm puts f before each
// column-parallel layer and g after each row-parallel one (tensor_parallel_comm.h). One step:
//
//   1. the walk (unit_runner.h) over this rank's slice: forward, the fused head, backward;
//      activations cross ranks only at f and g (4 per block) and in the embedding and the head;
//   2. sequence parallelism only: all_reduce of the replicated parameters' gradients (wpe, the
//      LayerNorms, the row-parallel biases), which each rank computed from its own rows of the
//      sequence; under plain TP every rank computed them from the same whole activations, so they
//      are already identical and nothing is sent;
//   3. AdamW on this rank's Ψ_r parameters: replicated parameters take the same step everywhere.
//
// The loss comes out of the vocab-parallel head whole on every rank (its max and sums are
// all-reduced), so no further reduction is needed. get_state/set_state map the slices to the
// whole model's GPT-2 names (GPTLayout::copy_to_full), so checkpoints are interchangeable with
// every other stage.
//
// On a GPU (--device cuda, any precision): the sharded model walks on `device` (GPT::with_device), and the
// parameters, gradients, AdamW's m and v and every activation and communication buffer are device
// memory; f, g and the sequence-parallel collectives get device tensors (an MPI backend stages
// them through host buffers, common/comm/process_group_staging.h). What crosses to the host:
// the initialisation, once (4Ψ_r bytes up); each step's token and target ids (the walk's); and
// get_state's slices (4Ψ_r bytes down per state, gathered over the group on the host).
//
// Glossary: t tensor-parallel ranks, r rank, B global batch, T sequence, C channels, H heads,
// V vocab, L layers, Ψ_r parameters per rank (tp_formulas.h).
#pragma once

#include <memory>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/optim/grad_clip.h"
#include "common/tp/tensor_parallel_comm.h"
#include "common/tp/tp_model.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// get_state's gather for any tensor-parallel slice: every rank's `slice` (its GPTLayout(cfg, t,
/// r) buffer, Ψ_r floats, the same size on every rank) to every rank, each written into its
/// places in the whole model's buffer `full` (Ψ floats, GPT-2 order). Collective over `tp`;
/// sends (t-1)/t·4tΨ_r bytes (not part of a training step).
void tp_slices_to_full(ProcessGroup& tp, const GPTConfig& cfg, const float* slice, float* full);

class TensorParallelStrategy : private TpModel, public MixedPrecisionStrategy {
 public:
  /// Collective over `tp`. Every rank initialises the whole model from `seed` and keeps its
  /// slice. Throws std::invalid_argument naming the values when t = tp.size() does not divide H,
  /// 4C and V (GPTLayout). With sequence_parallel, a step whose T is not divisible by t throws
  /// std::invalid_argument (common/nn/checks.h). `device`: where the slice's model, parameters,
  /// gradients and optimizer state live (Device::kCUDA: --device cuda). `mp`: the precision
  /// (common/train/mixed_precision.h): bf16 / fp16 store the slice's parameters, gradients and
  /// activations in 16 bits, so f's and g's all_reduces carry 2 bytes per element, and AdamW
  /// keeps the fp32 master copy of the slice; fp16's overflow skip is agreed over tp.
  TensorParallelStrategy(const GPTConfig& cfg, ProcessGroup& tp, AdamWConfig opt, uint64_t seed,
                         bool sequence_parallel = false, Device device = Device::kCPU,
                         MixedPrecisionConfig mp = {});

  /// The whole batch on every rank (tensor parallelism splits layers' widths, not data).
  BatchSlice batch_slice(int global_batch) const override { return {0, global_batch}; }
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Parameters, gradients and optimizer state against Ψ_r; activations per block against the
  /// table of tp_formulas.h; bytes sent in the last step against tp_bytes_per_step (and, with
  /// sequence parallelism, the re-gather and the replicated gradients' all_reduce); collective
  /// calls of the last step, over every group, against tp_collective_calls_per_step.
  std::vector<ReportRow> report() const override;
  // The progress line's loss scale and norm, a checkpoint's precision and loss-scaler state, and
  // mixed_precision(): MixedPrecisionStrategy's.

  const GPT& model() const { return *slice; }
  /// This rank's Ψ_r parameters (model().layout()), on model().device().
  const Tensor& local_params() const { return params_; }
  bool sequence_parallel() const { return sp_; }
  /// Bytes this rank sent in the last step: over the tp group (f, g, head), the re-gather group,
  /// and the replicated-gradient all_reduce.
  double last_step_tp_bytes() const { return tp_bytes_; }
  double last_step_regather_bytes() const { return regather_bytes_; }
  double last_step_grad_sync_bytes() const { return grad_sync_bytes_; }
  /// ZeRO-R Pa's all_gathers of partitioned checkpoints in the last step (their own group).
  double last_step_checkpoint_bytes() const { return checkpoint_bytes_; }
  /// Collective calls this rank made in the last step over all its groups (CommStats calls).
  int64_t last_step_collective_calls() const { return calls_; }
  /// kActivations bytes one block's forward kept in the last step (MemoryTracker).
  double last_block_activation_bytes() const { return block_bytes_; }

 private:
  /// Sums the replicated tensors' gradients over the group (sequence parallelism), packed into
  /// one buffer on the gradients' device (all_reduce_packed): sends 2(t-1)/t·e·Ψ_repl, e the
  /// gradients' element size.
  void all_reduce_replicated_grads();
  /// The gradient elements this rank counts in ‖g‖ (--clip_grad), as views of grads_ merged into
  /// runs: its slices of the split tensors, and the replicated ones on tp rank 0 only (on every
  /// rank they are equal after step 2's all_reduce, or by construction without sequence
  /// parallelism: counted t times, ‖g‖ would grow by their share).
  std::vector<Tensor> owned_grads() const;
  /// This rank's slice of the parameters from the host (Ψ_r fp32): into params_, or under mixed
  /// precision into AdamW's master copy, params_ rounded from it.
  void set_params(const float* values);

  // TpModel: the slice, its TpComm, and the re-gather, replicated-gradient and Pa checkpoint
  // groups (own CommStats each). MixedPrecisionStrategy: mp_, and clip_ (‖g‖² summed over tp
  // from owned_grads()).
  ProcessGroup& tp_;
  bool sp_;
  Tensor params_, grads_;       // Ψ_r each; 16-bit under mixed precision
  std::unique_ptr<AdamW> opt_;  // m, v: Ψ_r each
  double tp_bytes_ = 0, regather_bytes_ = 0, grad_sync_bytes_ = 0, checkpoint_bytes_ = 0;
  double block_bytes_ = 0;  // kept per block, averaged over the blocks
  int64_t calls_ = 0;       // collective calls in the last step, every group
  int last_B_ = 0, last_T_ = 0;
};

}  // namespace llmp
