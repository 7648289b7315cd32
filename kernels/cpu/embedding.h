// Token and position embeddings: x[b,t] = wte[tokens[b,t]] + wpe[t], forward and backward.
//
// Radford et al. 2019 (GPT-2) learns both tables; wte is tied to the LM head (Press & Wolf 2017),
// so its gradient has two parts, this scatter and the head's dlogitsᵀ·ln_f(x).
//
// Glossary: B batch, T sequence (≤ ctx), C channels, V vocabulary; wte (V,C), wpe (ctx,C).
#pragma once

#include <cstdint>

namespace llmp {
namespace cpu {

/// out (B,T,C) = wte[tokens (B,T)] + wpe[0..T). Precondition: 0 <= tokens < V (not checked here).
void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                       int T, int C);

/// Scatter-add of dout (B,T,C): dwte[tokens[b,t]] += dout[b,t], dwpe[t] += dout[b,t] (ACCUMULATED).
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                        int T, int C);

}  // namespace cpu
}  // namespace llmp
