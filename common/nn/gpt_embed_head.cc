// The first and last units of the GPT: embeddings (unit 0) and the head (ln_f + tied LM head +
// cross-entropy, unit L+1 plus wte), forward and backward.
//
//   x      = wte[tokens] + wpe[0..T)                 (B,T) -> (N,C)
//   h      = LN(x; ln_f)                             (N,C)
//   logits = h @ wteᵀ                                (N,C) @ (C,V) -> (N,V), in row chunks
//   loss   = loss_scale · Σ_n CE(logits_n, y_n)
//   dlogits = loss_scale·(softmax - onehot)          overwrites the logits chunk
//   dh = dlogits @ wte,  dwte += dlogitsᵀ @ h,  dx = LNᵀ(dh)
//
// The logits are never held whole: rows go through in chunks of at most kLogitsChunk elements
// (16 MiB), so GPT-2's (B·T, 50257) never exists; for the small presets one chunk holds them all.
// Press & Wolf 2017 (tied embeddings); llm.c's fused classifier.
//
// Glossary: B batch, T sequence, N = B·T, C channels, V vocab.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/nn/checks.h"
#include "common/nn/gpt.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"

namespace llmp {
namespace {

/// Largest logits chunk, in elements (rows·V).
constexpr int64_t kLogitsChunk = int64_t{1} << 22;

}  // namespace

void GPT::embed_forward(const float* emb_params, const int32_t* tokens, int B, int T,
                        float* x_out) const {
  check_batch_shape("embed_forward", cfg_, B, T);
  check_ids("embed_forward", "token", tokens, B, T, cfg_.vocab);
  const float* wte = emb_params;                                 // (V,C)
  const float* wpe = emb_params + int64_t{cfg_.vocab} * cfg_.d;  // (ctx,C)
  cpu::embedding_forward(x_out, tokens, wte, wpe, B, T, cfg_.d);
}

void GPT::embed_backward(const int32_t* tokens, int B, int T, const float* dx,
                         float* emb_grads) const {
  check_batch_shape("embed_backward", cfg_, B, T);
  check_ids("embed_backward", "token", tokens, B, T, cfg_.vocab);
  cpu::embedding_backward(emb_grads, emb_grads + int64_t{cfg_.vocab} * cfg_.d, dx, tokens, B, T,
                          cfg_.d);
}

double GPT::head_forward_backward(const float* lnf_params, const float* wte, const float* x,
                                  const int32_t* targets, int B, int T, float loss_scale, float* dx,
                                  float* lnf_grads, float* wte_grads) const {
  check_batch_shape("head_forward_backward", cfg_, B, T);
  check_ids("head_forward_backward", "target", targets, B, T, cfg_.vocab);
  const int C = cfg_.d, V = cfg_.vocab;
  const int N = B * T;
  const bool backward = dx != nullptr;
  const float* lnf_w = lnf_params;
  const float* lnf_b = lnf_params + C;

  // h = LN(x; ln_f)  (N,C)
  Tensor h = Tensor::empty({N, C}, DType::kF32, MemCategory::kActivations);
  Tensor mean = Tensor::empty({N}, DType::kF32, MemCategory::kActivations);
  Tensor rstd = Tensor::empty({N}, DType::kF32, MemCategory::kActivations);
  cpu::layernorm_forward(h.f32(), mean.f32(), rstd.f32(), x, lnf_w, lnf_b, N, C);

  const int rows = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(N, kLogitsChunk / V)));
  Tensor logits = Tensor::empty({rows, V}, DType::kF32, MemCategory::kActivations);
  Tensor dh;
  if (backward) dh = Tensor::empty({N, C}, DType::kF32, MemCategory::kActivations);

  double total = 0.0;
  for (int r0 = 0; r0 < N; r0 += rows) {
    const int n = std::min(rows, N - r0);
    const float* hc = h.f32() + int64_t{r0} * C;
    cpu::matmul_nt_forward(logits.f32(), hc, wte, n, C, V);  // (n,C) @ (C,V) -> (n,V)
    // Σ CE over the chunk; with backward the logits become loss_scale·(softmax - onehot).
    total += cpu::softmax_cross_entropy(logits.f32(), targets + r0, n, V, loss_scale, backward);
    if (backward)  // dh (n,C) = dlogits @ wte;  dwte (V,C) += dlogitsᵀ @ h
      cpu::matmul_nt_backward(dh.f32() + int64_t{r0} * C, wte_grads, logits.f32(), hc, wte, n, C,
                              V);
  }
  if (backward) {  // dx (N,C) = LNᵀ(dh); layernorm_backward accumulates, so start from 0
    std::memset(dx, 0, sizeof(float) * N * C);
    cpu::layernorm_backward(dx, lnf_grads, lnf_grads + C, dh.f32(), x, lnf_w, mean.f32(),
                            rstd.f32(), N, C);
  }
  return static_cast<double>(loss_scale) * total;
}

}  // namespace llmp
