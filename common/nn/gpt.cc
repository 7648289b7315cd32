// The whole GPT: construction, forward_backward (baseline, naive DP, DDP) and forward_loss.
//
// Weight layout, for anyone reading or writing a checkpoint. Ψ f32 values in one flat buffer,
// unit by unit (GPTLayout::params() gives each tensor's name, shape and offset). Names are those
// of Hugging Face's GPT-2 state_dict without the "transformer." prefix; every weight is stored
// (in, out) row-major and used as y = x @ W + b, which is also how HF's Conv1D stores GPT-2, so
// an HF checkpoint maps tensor for tensor without transposes.
//
//   unit  name                          shape       role
//   0     wte.weight                    (V, C)      token embedding; also the LM head (tied):
//                                                   logits = ln_f(x) @ wteᵀ  (no lm_head tensor)
//   0     wpe.weight                    (ctx, C)    position embedding
//   1+l   h.l.ln_1.weight / .bias       (C)         LayerNorm before attention
//   1+l   h.l.attn.c_attn.weight        (C, 3C)     fused q|k|v projection; columns [0,C) q,
//         h.l.attn.c_attn.bias          (3C)        [C,2C) k, [2C,3C) v; head h: cols h·hs..
//   1+l   h.l.attn.c_proj.weight / .bias (C, C) (C) attention output projection
//   1+l   h.l.ln_2.weight / .bias       (C)         LayerNorm before the MLP
//   1+l   h.l.mlp.c_fc.weight / .bias   (C, 4C) (4C) MLP up-projection, then GELU (tanh)
//   1+l   h.l.mlp.c_proj.weight / .bias (4C, C) (C) MLP down-projection
//   L+1   ln_f.weight / .bias           (C)         final LayerNorm
//
// Gradients use the same layout. Activations (BlockCache, the residual stream per layer, dx,
// logits) are Tensors counted as MemCategory::kActivations. Radford et al. 2019; llm.c.
//
// Glossary: B batch, T sequence, C channels, V vocab, ctx max T, L layers, hs = C/H, Ψ parameters.
#include "common/nn/gpt.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/nn/checks.h"

namespace llmp {

GPT::GPT(GPTConfig cfg) : cfg_(std::move(cfg)), layout_(cfg_) {}

double GPT::forward_backward(const float* params, float* grads, const int32_t* tokens,
                             const int32_t* targets, int B, int T, float loss_scale,
                             const std::function<void(int unit)>& on_unit_ready) const {
  check_batch_shape("forward_backward", cfg_, B, T);
  const int L = cfg_.layers, C = cfg_.d;
  const int64_t NC = int64_t{B} * T * C;
  auto P = [&](int u) { return params + layout_.unit_offset(u); };
  auto G = [&](int u) { return grads + layout_.unit_offset(u); };
  auto ready = [&](int u) {
    if (on_unit_ready) on_unit_ready(u);
  };
  const int64_t wte = layout_.find("wte.weight").offset;

  // Forward. xs holds the residual stream entering each block and leaving the last: x_0..x_L.
  Tensor xs = Tensor::empty({L + 1, B, T, C}, DType::kF32, MemCategory::kActivations);
  auto x = [&](int l) { return xs.f32() + l * NC; };
  std::vector<BlockCache> caches(L);
  embed_forward(P(0), tokens, B, T, x(0));
  for (int l = 0; l < L; ++l) block_forward(P(1 + l), x(l), B, T, x(l + 1), &caches[l]);

  // Backward, unit by unit in reverse; each unit's gradients are final when it is announced.
  Tensor dx = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
  Tensor dx2 = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
  const double loss = head_forward_backward(P(L + 1), params + wte, x(L), targets, B, T, loss_scale,
                                            dx.f32(), G(L + 1), grads + wte);
  ready(L + 1);
  for (int l = L - 1; l >= 0; --l) {
    block_backward(P(1 + l), x(l), caches[l], dx.f32(), dx2.f32(), G(1 + l));
    std::swap(dx, dx2);
    caches[l] = BlockCache{};  // this layer's activations are no longer needed
    ready(1 + l);
  }
  embed_backward(tokens, B, T, dx.f32(), G(0));
  ready(0);
  return loss;
}

double GPT::forward_loss(const float* params, const int32_t* tokens, const int32_t* targets, int B,
                         int T) const {
  check_batch_shape("forward_loss", cfg_, B, T);
  Tensor a = Tensor::empty({B, T, cfg_.d}, DType::kF32, MemCategory::kActivations);
  Tensor b = Tensor::empty({B, T, cfg_.d}, DType::kF32, MemCategory::kActivations);
  embed_forward(params + layout_.unit_offset(0), tokens, B, T, a.f32());
  for (int l = 0; l < cfg_.layers; ++l) {
    BlockCache cache;  // filled and dropped: no backward follows
    block_forward(params + layout_.unit_offset(1 + l), a.f32(), B, T, b.f32(), &cache);
    std::swap(a, b);
  }
  const double sum = head_forward_backward(params + layout_.unit_offset(cfg_.layers + 1),
                                           params + layout_.find("wte.weight").offset, a.f32(),
                                           targets, B, T, 1.0f, nullptr, nullptr, nullptr);
  return sum / (static_cast<double>(B) * T);
}

}  // namespace llmp
