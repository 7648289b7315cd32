// Lab loss_scaler: your implementation. Read README.md first, then loss_scaler.h (the full
// spec); run the tests with
//     bazel test //labs/loss_scaler:student_test
// They fail until loss_scaler_step() below is done. Add helpers here (or in new files, listed in
// BUILD's `starter` target) as you like; the tests only call loss_scaler_step().
//
// What you may use: group.all_reduce (or another collective of the group) on a small f32 Tensor,
// Tensor::empty / f32 / data<Eigen::half> / numel, std::isfinite, std::max. What you may not:
// common/optim's LossScaler (that is what this lab asks you to write).
//
// Glossary: S = state.scale, W = cfg.growth_interval, n elements of this rank's shard.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>

#include "common/runtime/check.h"
#include "labs/loss_scaler/loss_scaler.h"

namespace llmp {

// TODO(lab loss_scaler): one step of the dynamic loss scaler (spec: loss_scaler.h). In short:
//   (a) found = any element of grads16 (Eigen::half) is inf or nan, widened with
//       static_cast<float>;
//   (b) overflow = found on any rank of `group`: one collective of a one-element f32 flag (in the
//       tests only one rank sees the inf, so a rank that decides alone gets it wrong);
//   (c) overflow: skipped += 1, clean_in_a_row = 0, scale = max(S·backoff_factor, min_scale),
//       leave grads32 alone, return false;
//       clean: grads32[i] = float(grads16[i]) / S, clean_in_a_row += 1 and, when it reaches W,
//       scale = S·growth_factor and clean_in_a_row = 0; return true.
bool loss_scaler_step(ProcessGroup& group, const Tensor& grads16, Tensor& grads32,
                      ScalerState& state, const ScalerConfig& cfg) {
  LLMP_CHECK(grads16.device() == Device::kCPU && grads16.dtype() == DType::kF16,
             "loss_scaler_step: grads16 must be a host f16 tensor, got " + grads16.describe());
  LLMP_CHECK(grads32.device() == Device::kCPU && grads32.dtype() == DType::kF32,
             "loss_scaler_step: grads32 must be a host f32 tensor, got " + grads32.describe());
  LLMP_CHECK(grads16.numel() == grads32.numel(), "loss_scaler_step: grads16 " +
                                                     grads16.describe() + " and grads32 " +
                                                     grads32.describe() + " differ in numel");
  (void)group;  // TODO(lab loss_scaler): remove, and implement (a), (b) and (c) above.
  (void)state;
  (void)cfg;
  // Until then every step is "applied" with grads32 left as it was and S never changes: wrong.
  return true;
}

}  // namespace llmp
