// fp32 copies of 16-bit tensors for the attention cores under mixed precision: how a core that
// computes in fp32 takes the walk's 16-bit q|k|v and hands back a 16-bit result (the cores take
// Tensors; common/nn/f32_view.h has the same idea as kernel pointers). For an fp32 tensor every
// function is the tensor itself, so fp32 runs the code it ran before. Copies live on the
// tensor's device (its KernelOps widen and round), as MemCategory::kOther: transient conversion
// scratch, freed with the Tensor.
#pragma once

#include "common/tensor/tensor.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

/// t itself when fp32, else an fp32 copy of it (exact: every 16-bit value is an fp32 value).
inline Tensor as_f32(const Tensor& t) {
  if (t.dtype() == DType::kF32) return t;
  Tensor f = Tensor::empty(t.shape(), DType::kF32, MemCategory::kOther, t.device());
  kernel_ops(t.device()).widen(t.raw(), t.dtype(), f.f32(), t.numel());
  return f;
}

/// Where to compute a result that ends in `t`: t itself when fp32, else an fp32 scratch of its
/// shape (uninitialised), which round_into(t, scratch) rounds into t.
inline Tensor f32_result(const Tensor& t) {
  if (t.dtype() == DType::kF32) return t;
  return Tensor::empty(t.shape(), DType::kF32, MemCategory::kOther, t.device());
}

/// t = f32 rounded to t's dtype, once (nothing when t is fp32: f32 is then t itself).
inline void round_into(const Tensor& t, const Tensor& f32) {
  if (t.dtype() != DType::kF32)
    kernel_ops(t.device()).round_to(f32.f32(), t.raw(), t.dtype(), t.numel());
}

}  // namespace llmp
