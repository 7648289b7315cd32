// Causal multi-head self-attention (the part between c_attn and c_proj), forward and backward.
//
//   per batch b and head h:  S = Q Kᵀ / √hs (T,T),  P = softmax(S + causal mask) (T,T),
//                            Y = P V (T,hs)
//
// Vaswani et al. 2017 ("Attention Is All You Need", §3.2.2) with GPT-2's causal mask: position t
// attends to positions 0..t only. The layout follows llm.c: qkv (B,T,3C) holds q at channels
// [0,C), k at [C,2C), v at [2C,3C); head h owns channels [h·hs, (h+1)·hs) of each. P is kept
// (B,H,T,T) for the backward, with exact zeros above the diagonal.
//
// probs_dtype: f32 (the default) leaves P and dS as computed. f16 or bf16 (mixed precision: the
// model passes its bf16 activation dtype, common/nn/sublayer.h rounded_products) rounds P to that
// dtype as soon as it is made, before P V, and dS before dS K and dSᵀ Q, so every product here
// reads 16-bit values, as a GPU's 16-bit tensor cores need them: FlashAttention-2 (Dao 2023,
// Algorithms 1-2) casts P and dS to 16 bits before their products in the same way, and so does
// PyTorch's autocast, which hands the matmul after a softmax a 16-bit copy. The rounding is what
// changes, not the order of the arithmetic.
// Glossary: B batch, T sequence, C channels, H heads, hs = C/H head size; Q,K,V (T,hs) per head.
#pragma once

#include "common/tensor/tensor.h"

namespace llmp {
namespace cpu {

/// out (B,T,C) = causal multi-head attention of qkv (B,T,3C); att (B,H,T,T) receives P (values of
/// probs_dtype, see above). Throws std::invalid_argument for a probs_dtype that is none of f32,
/// f16, bf16.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H,
                       DType probs_dtype = DType::kF32);

/// att (B,H,T,T) = P of attention_forward alone (no P V): the same bits, for selective
/// recomputation (common/nn/recompute.h), which drops P after the forward and makes it again here.
void attention_probs(float* att, const float* qkv, int B, int T, int C, int H,
                     DType probs_dtype = DType::kF32);

/// dqkv (B,T,3C) OVERWRITTEN with ∂L/∂qkv, given dout (B,T,C), the forward's qkv and att.
/// scratch: T·T floats of workspace (dP of one head).
///   dP = dY Vᵀ,  dV = Pᵀ dY,  dS = P ⊙ (dP - rowsum(P ⊙ dP)) / √hs,  dQ = dS K,  dK = dSᵀ Q
/// with dS rounded to probs_dtype before its two products (see above).
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        float* scratch, int B, int T, int C, int H,
                        DType probs_dtype = DType::kF32);

}  // namespace cpu
}  // namespace llmp
