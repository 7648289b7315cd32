// Loss scaling: the scaler's update rule, the local inf/nan check, the agreement over ranks
// (loss_scaler.h). Glossary: S loss scale.
#include "common/optim/loss_scaler.h"

#include "kernels/ops/kernel_ops.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

namespace llmp {

namespace {

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("loss scaler: " + what);
}

bool finite_positive(float v) { return std::isfinite(v) && v > 0.0f; }

// Any element x of n with !isfinite(float(x)); T widens exactly to float.
template <typename T>
bool any_nonfinite(const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(static_cast<float>(x[i]))) return true;
  return false;
}

}  // namespace

LossScaler::LossScaler(LossScalerConfig cfg) : cfg_(cfg), scale_(cfg.scale) {
  if (!finite_positive(cfg.scale)) bad("scale " + num(cfg.scale) + " must be finite and > 0");
  if (!finite_positive(cfg.min_scale))
    bad("min_scale " + num(cfg.min_scale) + " must be finite and > 0");
  if (!(std::isfinite(cfg.growth_factor) && cfg.growth_factor > 1.0f))
    bad("growth_factor " + num(cfg.growth_factor) + " must be finite and > 1");
  if (!(cfg.backoff_factor > 0.0f && cfg.backoff_factor < 1.0f))
    bad("backoff_factor " + num(cfg.backoff_factor) + " must be in (0, 1)");
  if (cfg.growth_interval < 1)
    bad("growth_interval " + std::to_string(cfg.growth_interval) + " must be >= 1");
  if (cfg.dynamic && cfg.scale < cfg.min_scale)
    bad("initial scale " + num(cfg.scale) + " is below min_scale " + num(cfg.min_scale));
}

bool LossScaler::update(bool found_inf) {
  if (found_inf) {
    ++skipped_;
    clean_in_a_row_ = 0;
    if (cfg_.dynamic) scale_ = std::max(scale_ * cfg_.backoff_factor, cfg_.min_scale);
    return false;  // this step's gradients hold an inf or nan: skip it
  }
  ++clean_in_a_row_;
  if (cfg_.dynamic && clean_in_a_row_ == cfg_.growth_interval) {
    clean_in_a_row_ = 0;
    const float grown = scale_ * cfg_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;
  }
  return true;
}

void LossScaler::set_state(float scale, int64_t clean_in_a_row, int64_t skipped) {
  if (!finite_positive(scale)) bad("restored scale " + num(scale) + " must be finite and > 0");
  if (clean_in_a_row < 0)
    bad("restored clean-step counter " + std::to_string(clean_in_a_row) + " is negative");
  if (skipped < 0) bad("restored skipped-step count " + std::to_string(skipped) + " is negative");
  scale_ = scale;
  clean_in_a_row_ = clean_in_a_row;
  skipped_ = skipped;
}

namespace {

// On a device: the count of KernelOps::count_nonfinite, 16-bit elements widened (exactly) into
// an fp32 scratch on the device first, kChunk at a time (the scratch stays small: 4 MiB).
bool device_has_nonfinite(const Tensor& t) {
  KernelOps& ops = kernel_ops(t.device());
  if (t.dtype() == DType::kF32) return ops.count_nonfinite(t.f32(), t.numel()) > 0;
  constexpr int64_t kChunk = int64_t{1} << 20;
  Tensor wide = Tensor::empty({std::min(kChunk, t.numel())}, DType::kF32, MemCategory::kOther,
                              t.device());
  for (int64_t i0 = 0; i0 < t.numel(); i0 += kChunk) {
    const int64_t k = std::min(kChunk, t.numel() - i0);
    ops.widen(t.narrow(i0, k).raw(), t.dtype(), wide.f32(), k);
    if (ops.count_nonfinite(wide.f32(), k) > 0) return true;
  }
  return false;
}

}  // namespace

bool has_nonfinite(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return false;
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kF16 && t.dtype() != DType::kBF16)
    throw std::invalid_argument("has_nonfinite: f32, f16 or bf16 only, got " + t.describe());
  if (t.device() != Device::kCPU) return device_has_nonfinite(t);
  switch (t.dtype()) {
    case DType::kF32: return any_nonfinite(t.data<float>(), t.numel());
    case DType::kF16: return any_nonfinite(t.data<Eigen::half>(), t.numel());
    default: return any_nonfinite(t.data<Eigen::bfloat16>(), t.numel());
  }
}

OverflowAgreement::OverflowAgreement(ProcessGroup& g) : book_(g.duplicate()) {}

bool OverflowAgreement::any(bool local_found_inf) {
  Tensor flag = Tensor::empty({1});
  flag.f32()[0] = local_found_inf ? 1.0f : 0.0f;
  book_->all_reduce(flag, ReduceOp::kMax);  // sends 2(N-1)/N·4 bytes, on the duplicate
  return flag.f32()[0] > 0.0f;
}

}  // namespace llmp
