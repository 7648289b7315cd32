// WidenedCore (widened_core.h): widen in, the fp32 core, round out.
#include "common/cp/widened_core.h"

#include "common/cp/f32_copies.h"

namespace llmp {

void WidenedCore::forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                          AttentionKeep* keep) {
  if (qkv.dtype() == DType::kF32) return inner().forward(qkv, out, B, T, H, keep);
  Tensor out32 = f32_result(out);
  inner().forward(as_f32(qkv), out32, B, T, H, keep);
  round_into(out, out32);
}

void WidenedCore::backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                           AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  if (qkv.dtype() == DType::kF32) return inner().backward(dout, qkv, out, keep, dqkv, B, T, H);
  Tensor dqkv32 = f32_result(dqkv);
  inner().backward(as_f32(dout), as_f32(qkv), as_f32(out), keep, dqkv32, B, T, H);
  round_into(dqkv, dqkv32);
}

}  // namespace llmp
