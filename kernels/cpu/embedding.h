// Token and position embeddings, forward and backward, for a vocabulary and a sequence that may
// be split over tensor-parallel ranks.
//
//   x[b,t] = wte[tokens[b,t]] + wpe[t]
//
// Radford et al. 2019 (GPT-2) learns both tables; wte is tied to the LM head (Press & Wolf 2017),
// so its gradient has two parts, this scatter and the head's dlogitsᵀ·ln_f(x). Megatron-LM's
// vocab-parallel embedding (Shoeybi et al. 2019, §3) gives rank r the rows [v0, v0 + Vr) of wte:
// token_embedding_forward writes a token's row when it is one of them and zeros otherwise, and
// the partial results are summed over the ranks. Position rows are added after that sum, on the
// positions a rank holds (all of them, or its slice of the sequence under sequence parallelism).
//
// Glossary: B batch, T sequence (≤ ctx), Tl positions held (T, or T/t), t0 the first of them,
// C channels, V vocabulary, Vr rows of wte held, v0 the first; wte (Vr,C), wpe (ctx,C), N = B·T.
#pragma once

#include <cstdint>

namespace llmp {
namespace cpu {

/// out (N,C) = wte[tokens[n] - v0] for tokens in [v0, v0 + Vr), 0 for the others (OVERWRITES).
void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int v0, int Vr,
                             int N, int C);
/// dwte (Vr,C) += scatter of dout (N,C) into the rows of the tokens in [v0, v0 + Vr).
void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int v0, int Vr,
                              int N, int C);

/// x (B,Tl,C) += wpe[t0 + t] for t in [0, Tl).
void position_embedding_forward(float* x, const float* wpe, int B, int Tl, int t0, int C);
/// dwpe[t0 + t] += Σ_b dx[b,t] (ACCUMULATED), dx (B,Tl,C).
void position_embedding_backward(float* dwpe, const float* dx, int B, int Tl, int t0, int C);

/// x (B,Tl,C) += wpe[positions[t]] for t in [0, Tl): any positions a rank holds (context
/// parallelism's balanced split holds two runs, common/nn/attention_core.h).
void position_embedding_forward_at(float* x, const float* wpe, int B, int Tl,
                                   const int* positions, int C);
/// dwpe[positions[t]] += Σ_b dx[b,t] (ACCUMULATED), dx (B,Tl,C).
void position_embedding_backward_at(float* dwpe, const float* dx, int B, int Tl,
                                    const int* positions, int C);

}  // namespace cpu
}  // namespace llmp
