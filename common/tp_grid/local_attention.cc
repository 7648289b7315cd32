// local_attention_forward / _backward (see local_attention.h).
#include "common/tp_grid/local_attention.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "common/nn/recompute.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

Tensor activation(std::vector<int64_t> shape, Device d) {
  return Tensor::empty(std::move(shape), DType::kF32, MemCategory::kActivations, d);
}

}  // namespace

void local_attention_forward(const Tensor& qkv, const Tensor& atty, int Bl, int T, int H,
                             AttentionMethod method, bool drop_probs, LocalAttentionKeep* keep) {
  const int A = static_cast<int>(atty.numel() / (int64_t{Bl} * T));
  if (method == AttentionMethod::kFlash) {  // lse (Bl,H,T) kept, no P
    keep->lse = flash_attention_forward(qkv.view({Bl, T, 3 * A}), atty.view({Bl, T, A}), Bl, T, H);
    return;
  }
  keep->att = activation({Bl, H, T, T}, qkv.device());
  kernel_ops(qkv.device()).attention_forward(atty.f32(), keep->att.f32(), qkv.f32(), Bl, T, A, H);
  if (drop_probs) keep->att = Tensor();  // selective recomputation: made again in the backward
}

void local_attention_backward(const Tensor& dqkv, const Tensor& datty, const Tensor& qkv,
                              const Tensor& atty, LocalAttentionKeep* keep, int Bl, int T, int H) {
  const int A = static_cast<int>(atty.numel() / (int64_t{Bl} * T));
  const Device dev = qkv.device();
  if (keep->lse.defined()) {  // flash attention: P made again from q, k and lse
    flash_attention_backward(dqkv.view({Bl, T, 3 * A}), datty.view({Bl, T, A}),
                             qkv.view({Bl, T, 3 * A}), atty.view({Bl, T, A}), keep->lse, Bl, T, H);
    return;
  }
  KernelOps& ops = kernel_ops(dev);
  if (!keep->att.defined()) {  // selective recomputation: P again from this rank's q and k
    CountRecomputedFlops count;
    keep->att = activation({Bl, H, T, T}, dev);
    ops.attention_probs(keep->att.f32(), qkv.f32(), Bl, T, A, H);
    RecomputeMeter::instance().recomputed_probs += 1;
  }
  Tensor scratch = activation({int64_t{T} * T}, dev);  // dP of one head
  ops.attention_backward(dqkv.f32(), datty.f32(), qkv.f32(), keep->att.f32(), scratch.f32(), Bl,
                         T, A, H);
}

}  // namespace llmp
