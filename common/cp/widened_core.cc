// WidenedCore (widened_core.h): widen in, the fp32 core, round out.
#include "common/cp/widened_core.h"

#include <stdexcept>
#include <utility>

#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

/// An fp32 copy of a 16-bit tensor, on its device (the device's widen kernel).
Tensor widened(const Tensor& t) {
  Tensor f = Tensor::empty(t.shape(), DType::kF32, MemCategory::kOther, t.device());
  kernel_ops(t.device()).widen(t.raw(), t.dtype(), f.f32(), t.numel());
  return f;
}

/// An fp32 tensor of t's shape on t's device, for the inner core's result.
Tensor f32_like(const Tensor& t) {
  return Tensor::empty(t.shape(), DType::kF32, MemCategory::kOther, t.device());
}

/// dst (16-bit) = src (fp32) rounded to nearest even, once.
void round_into(const Tensor& dst, const Tensor& src) {
  kernel_ops(dst.device()).round_to(src.f32(), dst.raw(), dst.dtype(), dst.numel());
}

}  // namespace

WidenedCore::WidenedCore(std::unique_ptr<AttentionCore> inner) : inner_(std::move(inner)) {
  if (!inner_) throw std::invalid_argument("WidenedCore: no inner core");
}

void WidenedCore::forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                          AttentionKeep* keep) {
  if (qkv.dtype() == DType::kF32) return inner_->forward(qkv, out, B, T, H, keep);
  Tensor out32 = f32_like(out);
  inner_->forward(widened(qkv), out32, B, T, H, keep);
  round_into(out, out32);
}

void WidenedCore::backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                           AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  if (qkv.dtype() == DType::kF32) return inner_->backward(dout, qkv, out, keep, dqkv, B, T, H);
  Tensor dqkv32 = f32_like(dqkv);
  inner_->backward(widened(dout), widened(qkv), widened(out), keep, dqkv32, B, T, H);
  round_into(dqkv, dqkv32);
}

}  // namespace llmp
