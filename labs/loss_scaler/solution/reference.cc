// Lab loss_scaler, reference solution (for instructors; students start from ../starter.cc).
//
// The dynamic loss scaler (Micikevicius et al. 2018 §3.2; Megatron's DynamicGradScaler without
// hysteresis): look for inf/nan in this rank's shard, agree over the ranks with a max of a flag,
// then skip and back off, or unscale into f32 and grow after W clean steps in a row.
//
// Glossary: S loss scale, W growth interval, n elements of this rank's shard.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>

#include "common/runtime/check.h"
#include "labs/loss_scaler/loss_scaler.h"

namespace llmp {

bool loss_scaler_step(ProcessGroup& group, const Tensor& grads16, Tensor& grads32,
                      ScalerState& state, const ScalerConfig& cfg) {
  LLMP_CHECK(grads16.device() == Device::kCPU && grads16.dtype() == DType::kF16,
             "loss_scaler_step: grads16 must be a host f16 tensor, got " + grads16.describe());
  LLMP_CHECK(grads32.device() == Device::kCPU && grads32.dtype() == DType::kF32,
             "loss_scaler_step: grads32 must be a host f32 tensor, got " + grads32.describe());
  LLMP_CHECK(grads16.numel() == grads32.numel(), "loss_scaler_step: grads16 " +
                                                     grads16.describe() + " and grads32 " +
                                                     grads32.describe() + " differ in numel");
  const int64_t n = grads16.numel();
  const Eigen::half* g16 = n ? grads16.data<Eigen::half>() : nullptr;

  // (a) this rank's shard: any inf or nan? (A large finite f16 such as 65504 is fine.)
  bool found = false;
  for (int64_t i = 0; i < n && !found; ++i) found = !std::isfinite(static_cast<float>(g16[i]));

  // (b) agree: the max of the flags over the group. Every rank sees the same answer, so every
  // rank skips or applies the same step.                       all_reduce sends 2(N-1)/N·4 bytes
  Tensor flag = Tensor::empty({1});
  flag.f32()[0] = found ? 1.0f : 0.0f;
  group.all_reduce(flag, ReduceOp::kMax);
  const bool overflow = flag.f32()[0] > 0.0f;

  // (c) overflow: this step's gradients are garbage. Skip it; a smaller S next time.
  if (overflow) {
    state.skipped += 1;
    state.clean_in_a_row = 0;
    state.scale = std::max(state.scale * cfg.backoff_factor, cfg.min_scale);
    return false;
  }
  // Clean: unscale with the S the gradients were scaled by (x/2^k is exact), then maybe grow.
  float* g32 = n ? grads32.f32() : nullptr;
  const float inv = 1.0f / state.scale;
  for (int64_t i = 0; i < n; ++i) g32[i] = static_cast<float>(g16[i]) * inv;
  if (++state.clean_in_a_row == cfg.growth_interval) {
    state.scale *= cfg.growth_factor;
    state.clean_in_a_row = 0;
  }
  return true;
}

}  // namespace llmp
