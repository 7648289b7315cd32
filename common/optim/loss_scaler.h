// Loss scaling for fp16 training: static or dynamic scale S, the overflow check, and the
// agreement of that check over the ranks.
//
// Micikevicius et al. 2018, "Mixed Precision Training", §3.2: many activation gradients of a
// network are smaller than fp16's smallest subnormal (2^-24 ≈ 6e-8) and flush to zero.
// Multiplying the loss by S before the backward multiplies every gradient by S (the chain rule is
// linear), which shifts them up into fp16's range; the optimizer multiplies the fp32 copy of the
// gradients by 1/S before the update, so the update is unchanged. With S a power of two both
// products are exact (only the exponent changes). Too large an S makes a gradient overflow fp16's
// largest finite value (65504) to inf (or a product to nan): that step's gradients are garbage,
// so the step is skipped.
//
// The dynamic scaler (Megatron-LM megatron/core/optimizer/grad_scaler.py DynamicGradScaler, without
// its hysteresis; DeepSpeed runtime/fp16/loss_scaler.py DynamicLossScaler; torch.amp.GradScaler):
//   overflow  (some gradient inf or nan):  skip the step, S ← max(S·backoff, min_scale),
//                                           clean counter ← 0
//   clean step:                             apply the step, counter += 1; when the counter reaches
//                                           growth_interval: S ← S·growth, counter ← 0
// So S falls fast when too large and creeps up again, staying near the largest S that does not
// overflow. A static scaler (--loss_scale S) keeps S fixed and still skips overflowing steps.
//
// Ranks. Under data parallelism every rank must apply or skip the same step, or their replicas
// (or ZeRO shards) diverge; under ZeRO a rank sees only its shard of the gradients, so one rank
// may see an inf the others do not. The check is therefore agreed: OverflowAgreement::any is a
// max of a flag over the group. Every rank then calls update() with the same value, and all ranks
// hold the same S.
//
// Glossary: S loss scale, g a gradient, N ranks, "clean" step = no inf/nan on any rank.
#pragma once

#include <cstdint>
#include <memory>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// The scaler's settings (flags: --loss_scale, --initial_loss_scale, --loss_scale_window, ...,
/// named after Megatron's). Defaults are Megatron's and DeepSpeed's.
struct LossScalerConfig {
  bool dynamic = true;
  float scale = 65536.0f;        ///< static S, or the dynamic scaler's initial S (2^16)
  float growth_factor = 2.0f;    ///< S *= 2 after growth_interval clean steps in a row
  float backoff_factor = 0.5f;   ///< S *= 0.5 on an overflow (the step is skipped)
  int growth_interval = 1000;    ///< Megatron's --loss-scale-window / DeepSpeed's loss_scale_window
  float min_scale = 1.0f;        ///< S never goes below
};

/// The scale S and its update rule (file comment). Not collective: the caller agrees found_inf
/// over the ranks first (OverflowAgreement), so every rank's scaler evolves identically.
class LossScaler {
 public:
  /// Throws std::invalid_argument naming the field and its value when: scale or min_scale is not
  /// finite and > 0; growth_factor is not finite and > 1; backoff_factor is not in (0, 1);
  /// growth_interval < 1; or (dynamic) scale < min_scale.
  explicit LossScaler(LossScalerConfig cfg);

  /// S to multiply the loss by this step.
  float scale() const { return scale_; }
  /// 1/S, what the optimizer multiplies the (fp32-widened) gradients by. Exact for S = 2^k.
  float inv_scale() const { return 1.0f / scale_; }

  /// After the backward: `found_inf` must already be agreed by all ranks (OverflowAgreement).
  /// Returns true when the optimizer step should be applied, false when it must be skipped
  /// (found_inf, static or dynamic). Dynamic: on found_inf S ← max(S·backoff_factor, min_scale)
  /// and the clean counter restarts at 0; otherwise the counter grows by one and, on the step it
  /// reaches growth_interval, S ← S·growth_factor (unless that is not finite: S stays) and the
  /// counter restarts. Static: S never changes (the counter still counts).
  bool update(bool found_inf);

  /// Steps skipped so far (overflows), including those restored by set_state.
  int64_t skipped_steps() const { return skipped_; }
  /// Clean steps since the last overflow or growth (0 ≤ it < growth_interval when dynamic).
  int64_t clean_steps_in_a_row() const { return clean_in_a_row_; }
  const LossScalerConfig& config() const { return cfg_; }

  /// Checkpoint state: S, the clean-step counter and the skipped total (as saved from scale(),
  /// clean_steps_in_a_row(), skipped_steps()). Throws std::invalid_argument naming the value when
  /// scale is not finite and > 0 or a counter is negative.
  void set_state(float scale, int64_t clean_in_a_row, int64_t skipped);

 private:
  LossScalerConfig cfg_;
  float scale_;
  int64_t clean_in_a_row_ = 0;
  int64_t skipped_ = 0;
};

/// Any inf or nan among the numel() elements of `t`, this rank only (no communication). f16 and
/// bf16 elements are widened to f32 exactly first, so a large finite f16 (65504) is finite.
/// On a device the check runs there (KernelOps widen and count_nonfinite; one count, a host
/// value, comes back per 2^20 elements). Throws std::invalid_argument naming the tensor when it
/// is not f32, f16 or bf16. An undefined or empty tensor has none.
bool has_nonfinite(const Tensor& t);

/// The overflow check agreed over a group: true on every rank when any rank found an inf/nan.
/// Runs on a duplicate() of the group (bookkeeping, as MetricsReducer in common/train/dp_util.h):
/// the technique's CommStats never count it.
class OverflowAgreement {
 public:
  /// Collective over `g` (it duplicates it).
  explicit OverflowAgreement(ProcessGroup& g);
  /// Collective: every rank of the group calls it with its own flag; returns the logical OR of
  /// them on every rank. One all_reduce (kMax) of one f32 on the duplicate:
  ///                                                                   sends 2(N-1)/N·4 bytes
  bool any(bool local_found_inf);

 private:
  std::shared_ptr<ProcessGroup> book_;
};

}  // namespace llmp
