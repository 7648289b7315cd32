// Lab loss_scaler: the adapter header. The tests call loss_scaler_step() and nothing else, so you
// may organise your code (helpers, files) as you like behind this one function.
//
// The dynamic loss scaler of fp16 mixed-precision training (Micikevicius et al. 2018, "Mixed
// Precision Training", §3.2; Megatron-LM's DynamicGradScaler, DeepSpeed's DynamicLossScaler):
// the loss was multiplied by S before the backward, so the 16-bit gradients hold S·g. After the
// backward, every rank of the data-parallel group calls loss_scaler_step() with its shard of
// them (under ZeRO a rank holds only a shard, so one rank may see an inf the others do not).
//
// Glossary: S = state.scale, W = cfg.growth_interval, N = group.size() ranks, n = grads16.numel()
// elements of this rank's shard, "clean" step = no inf and no nan on ANY rank.
#pragma once

#include <cstdint>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// The scaler's constants (Megatron's and DeepSpeed's defaults).
struct ScalerConfig {
  float growth_factor = 2.0f;   ///< S ← S·growth_factor after W clean steps in a row
  float backoff_factor = 0.5f;  ///< S ← S·backoff_factor on an overflow
  int growth_interval = 1000;   ///< W: Megatron's --loss-scale-window
  float min_scale = 1.0f;       ///< S never goes below
};

/// What the scaler carries from step to step (and a checkpoint would save).
struct ScalerState {
  float scale = 65536.0f;      ///< S: the loss of the NEXT step is multiplied by it (2^16 at first)
  int64_t clean_in_a_row = 0;  ///< clean steps since the last overflow or growth, 0 ≤ it < W
  int64_t skipped = 0;         ///< steps skipped so far
};

/// One step of the dynamic loss scaler, after the backward. Returns true when the optimizer step
/// must be applied (with grads32), false when it must be skipped.
///
/// Collective: every rank of `group` calls it once per step, with its own shard (shards may have
/// different sizes, n = 0 included) and the same cfg and state (which stay the same on every
/// rank afterwards).
///
///   (a) local check: found = any element of grads16 is inf, -inf or nan (this rank only);
///   (b) agreement:   overflow = found on ANY rank of the group. This needs a collective of
///                    `group` (a max, or a sum, of a one-element f32 flag); every rank must reach
///                    the same answer, or the ranks' replicas or shards of the model diverge;
///   (c) overflow:    skip. state.skipped += 1, state.clean_in_a_row = 0,
///                    state.scale = max(S·backoff_factor, min_scale); grads32 is left untouched;
///                    return false.
///       clean step:  unscale: grads32[i] = float(grads16[i]) / S for every i (exact when S is a
///                    power of two, as in every test); state.clean_in_a_row += 1, and on the step
///                    it reaches W (not one earlier): state.scale = S·growth_factor,
///                    state.clean_in_a_row = 0; return true.
/// Note the order: on a clean step the gradients are unscaled by the S they were scaled with,
/// before S grows.
///
/// Data: grads16 a host f16 tensor (Eigen::half elements: #include <Eigen/Core>;
/// static_cast<float>(h) widens exactly, std::isfinite on the widened value tests it); grads32 a
/// host f32 tensor with the same numel. Both may be views (narrow()); only their own n elements
/// are read or written.
///
/// Traffic: one all_reduce of one f32 on `group`, 2(N-1)/N·4 bytes (nothing at N = 1).
///
/// Errors: a wrong dtype or device, or numels that differ, end every rank with file:line and the
/// tensors' descriptions (LLMP_CHECK).
bool loss_scaler_step(ProcessGroup& group, const Tensor& grads16, Tensor& grads32,
                      ScalerState& state, const ScalerConfig& cfg);

}  // namespace llmp
