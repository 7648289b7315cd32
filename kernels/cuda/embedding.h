// Token and position embeddings on the GPU: the twin of kernels/cpu/embedding.h (GPT-2's wte and
// wpe; Megatron-LM's vocab-parallel embedding, Shoeybi et al. 2019 §3: rank r holds rows
// [v0, v0 + Vr) of wte and writes zeros for the other tokens).
//
//   x[b,t] = wte[tokens[b,t] - v0] (or 0) + wpe[t0 + t]      backward: scatter-add of dx
//
// Launch shape: grid-stride loops over the N·C (or B·Tl·C) elements; element i is row i / C,
// channel i % C. The backward scatters with atomicAdd: two tokens of a batch (or two batch
// entries of a position) hit the same row, and the float additions then happen in an
// unspecified order (results differ from the CPU's in the last bits, not more).
// Glossary: B batch, Tl positions held, t0 the first, C channels, Vr rows of wte held, v0 the
// first, N = B·T. tokens and positions are DEVICE arrays too. On stream(), asynchronous.
#pragma once

#include <cstdint>

namespace llmp {
namespace cuda {

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

/// x (B,Tl,C) += wpe[positions[t]] for t in [0, Tl) (positions: Tl device ints).
void position_embedding_forward_at(float* x, const float* wpe, int B, int Tl,
                                   const int* positions, int C);
/// dwpe[positions[t]] += Σ_b dx[b,t] (ACCUMULATED), dx (B,Tl,C).
void position_embedding_backward_at(float* dwpe, const float* dx, int B, int Tl,
                                    const int* positions, int C);

}  // namespace cuda
}  // namespace llmp
