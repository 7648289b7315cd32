// Softmax cross-entropy over the vocabulary, fused with its backward, in three steps so that a
// vocabulary split over tensor-parallel ranks can reduce between them.
//
//   loss_n = -log softmax(z_n)[y_n] = m_n + log Σ_v exp(z_nv - m_n) - z_n[y_n],  m_n = max_v z_nv
//   ∂loss_n/∂z_n = softmax(z_n) - onehot(y_n)
//
// A rank holds the logits of vocabulary rows [v0, v0 + Vr) only: z (N, Vr). The row maximum, the
// sum of exponentials and the target logit are then partial; Megatron-LM's vocab-parallel
// cross-entropy (Shoeybi et al. 2019, §3) all-reduces the first with max and the other two with
// sum over the tensor-parallel group between the steps below. On one rank (v0 = 0, Vr = V) those
// reductions are the identity, steps 1 and 2 are one (cross_entropy_max_sums), and the result is
// the ordinary fused softmax cross-entropy (llm.c's fused_classifier): step 3 recomputes each
// exp(z - m) and writes the gradient over the logits in place, so the (N, V) probabilities never
// exist next to them. For GPT-2's V = 50257 the logits are the largest activation, and a pass over
// them the head's largest cost after its products: one read for steps 1-2 and one read and write
// for step 3 is what a GPU pays (kernels/cuda/cross_entropy.h).
//
// Glossary: N rows (= B·T tokens), V vocabulary, Vr = V/t vocabulary rows of this rank, v0 its
// first row, z logits (N,Vr), y targets (N) in [0,V), m row maxima (N), s sums (N).
#pragma once

#include <cstdint>

namespace llmp {
enum class DType;  // common/tensor/tensor.h
}

namespace llmp {
namespace cpu {

/// Step 1: m (N) = max over this rank's logits of each row, z (N,Vr). Reduce m with max.
void cross_entropy_row_max(float* m, const float* z, int N, int Vr);

/// Step 2, with m the row maxima over the whole vocabulary: sums (2N) = [ s_n = Σ_v exp(z_nv -
/// m_n) | z_n[y_n] when y_n ∈ [v0, v0+Vr), else 0 ]. z is only read. Reduce sums with sum: then
/// every rank has the full s_n and the target logit.
void cross_entropy_exp_sums(float* sums, const float* z, const int32_t* y, int v0, int N, int Vr,
                            const float* m);

/// Steps 1 and 2 in one, for a rank that holds the whole vocabulary (v0 = 0, Vr = V: nothing to
/// reduce between them): m and sums as the two steps give them, z only read. A GPU reads z once
/// (the online softmax's running max and rescaled sum, Milakov & Gimelshein 2018), where the two
/// steps read it twice; here the row is read twice from cache, bit for bit the two steps.
void cross_entropy_max_sums(float* m, float* sums, const float* z, const int32_t* y, int v0,
                            int N, int Vr);

/// Step 3, with the reduced m and sums: returns Σ_n loss_n (in double, unscaled). With
/// `backward`, z (the logits steps 1 and 2 read) is OVERWRITTEN by dloss·(softmax - onehot), the
/// gradient of dloss·Σ_n loss_n w.r.t. this rank's logits, each element then rounded to a value
/// of grad_dtype (convert.h round_values: f16/bf16 values kept in fp32 for a 16-bit product to
/// read; f32: not rounded). Throws std::invalid_argument for another grad_dtype.
double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                          const float* sums, float dloss, bool backward, DType grad_dtype);

}  // namespace cpu
}  // namespace llmp
