// Gradient clipping by the global norm (--clip_grad c), on any layout of the gradient over ranks.
//
// Pascanu, Mikolov & Bengio 2013, "On the difficulty of training recurrent neural networks", §3.2:
//
//   ‖g‖ = √(Σ_i g_i²)   over EVERY parameter of the model, one number for the whole step
//   g  ← g · min(1, c / (‖g‖ + 1e-6))       (torch.nn.utils.clip_grad_norm_'s 1e-6)
//
// GPT-2/3 practice is c = 1 (GPT-3 §B; nanoGPT, llm.c and Megatron-LM's --clip-grad default).
//
// The parallel part. ‖g‖ is the norm of the whole model's gradient, but under most stages no rank
// holds that gradient whole. Each rank sums the squares of the elements it OWNS (that no other
// rank counts), and the partial sums are all-reduced over the ranks that split the gradient:
//
//   stage                       what a rank owns                      sum over
//   baseline, naive DP, DDP     the whole (reduced) gradient          nothing: each rank alone
//   ZeRO-1, -2, -3              its shard, the valid part of the last all_reduce over dp
//   pipelines (PipeDream-2BW:   its stages' units; wte's copy on the  all_reduce over pp
//   per update)                 last stage and Chimera's replicated
//                               stages by the lowest rank holding them
//   tensor parallel             its slices of split tensors, and the  all_reduce over tp
//                               replicated ones (LayerNorms, row-
//                               parallel biases, wpe) on tp rank 0
//   context parallel            the whole gradient, after the         nothing: each rank alone
//                               all_reduce over the sequence's ranks
//   2D / 2.5D tensor parallel   its matrix blocks on depth layer 0,   all_reduce over all ranks
//                               its vector blocks there on row 0
//   3D tensor parallel          its weight pieces; a vector held by   all_reduce over the cube
//                               a plane on the plane's first rank
//   mixture of experts          the dense tensors on rank 0, the      all_reduce over all ranks
//                               experts on the first rank holding them
//   hybrid (dp × pp × tp)       the owned elements of the pipeline    all_reduce over all ranks
//                               and tensor-parallel rules that fall
//                               in its ZeRO shard
//
// This is Megatron-LM's clip_grad_norm_fp32 (parameters that are not "tensor-parallel duplicates"
// nor the shared embedding's second copy, all-reduced over the model-parallel group) and
// DeepSpeed ZeRO's norm over the partitions. The classic bugs are the two ways of getting the
// ownership wrong: no all_reduce (each rank clips by its own part's norm, ~1/√N of the whole) or a
// replicated tensor counted on every rank that holds it. Both change the norm, which every
// stage's progress line prints ("grad norm 0.812345"); tests/clip_grad_test.sh checks it
// against the baseline's, step by step.
//
// The coefficient is not applied by a pass over the gradients: AdamW multiplies each gradient by
// it as it reads it (cpu::AdamWStep::grad_scale), with fp16's 1/S (DeepSpeed's "combined scale").
// Under fp16 ‖g‖ is the norm of the unscaled gradients, ‖S·g‖/S; an overflowed step is skipped
// before any norm is taken. A non-finite ‖g‖ (fp32 gradients holding inf or NaN) gives a
// coefficient of 0 or NaN, as torch's does: the loss then diverges and the run ends there.
//
// Cost per step: one pass over the rank's owned gradient elements (read only) and, on a GPU, one
// synchronising 8-byte copy to the host per owned part (coefficient()'s list: one for a replica
// or a shard, 2L + 1 runs on a tensor-parallel rank other than 0); one all_reduce of 8 bytes
// (2(N-1)/N·8 sent) on a bookkeeping duplicate of the group, so the stage's byte counts stay the
// paper's formulas.
//
// Glossary: g gradient, c --clip_grad, N ranks of the group, S fp16's loss scale.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// min(1, c / (norm + 1e-6)) as a float: what the gradients are multiplied by (1 when c = 0).
float clip_coefficient(double norm, double max_norm);

/// The elements of a flat gradient buffer that a rank owns, as ranges [offset, offset + numel),
/// cut into the views GradClip::coefficient takes (on a GPU one 8-byte read-back per view, so
/// adjacent ranges are merged into one).
class OwnedRanges {
 public:
  /// Adds [offset, offset + numel): merged into the last range when it starts where that one
  /// ends; numel = 0 adds nothing. Ranges must not overlap (not checked).
  void add(int64_t offset, int64_t numel);
  /// Views of `t`, which holds the buffer's elements [from, from + t.numel()) (the whole buffer,
  /// or a ZeRO shard of it), over each range's overlap with them, in the order added.
  std::vector<Tensor> views(const Tensor& t, int64_t from = 0) const;
  /// The merged ranges as (offset, numel).
  std::vector<std::pair<int64_t, int64_t>> ranges() const;

 private:
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // [begin, end)
};

/// One stage's clipping: the owned parts' squares, their sum over the group, the coefficient.
class GradClip {
 public:
  /// c = max_norm (> 0 clips, 0: off). `split_over`: the group whose ranks together own the
  /// whole gradient (nullptr or a one-rank group: this rank owns all of it). Collective over
  /// split_over when c > 0 (it duplicates the group for its all_reduce). Throws
  /// std::invalid_argument naming a max_norm that is negative or not finite.
  GradClip(double max_norm, ProcessGroup* split_over);

  bool on() const { return max_norm_ > 0; }
  double max_norm() const { return max_norm_; }

  /// One step: ‖g‖ = inv_scale · √(Σ_ranks Σ_{t ∈ owned} Σ_i t_i²) (owned: this rank's owned
  /// gradient elements, tensors of f32/f16/bf16 on any device, possibly empty), kept as
  /// last_norm(); returns clip_coefficient(‖g‖, c). Collective over split_over. Off: returns 1
  /// and computes nothing.
  float coefficient(const std::vector<Tensor>& owned, float inv_scale = 1.0f);

  /// A step that took no norm (fp16's skipped step): last_norm() is NaN until the next one.
  void skip() { last_norm_ = std::numeric_limits<double>::quiet_NaN(); }
  /// ‖g‖ of the last coefficient() call (NaN before the first, and after skip()).
  double last_norm() const { return last_norm_; }
  /// " | grad norm 0.812345" (" (clipped)" when the coefficient was < 1), or "" when off: the
  /// progress line's note.
  std::string step_note() const;

 private:
  double max_norm_;
  std::shared_ptr<ProcessGroup> group_;  // a duplicate of split_over (null: one rank)
  double last_norm_;
};

}  // namespace llmp
