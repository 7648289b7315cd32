// Softmax cross-entropy over the vocabulary, fused with its backward.
//
//   loss_n = -log softmax(z_n)[y_n] = logsumexp(z_n) - z_n[y_n]
//   ∂loss_n/∂z_n = softmax(z_n) - onehot(y_n)
//
// Fusing the two (as llm.c's fused_classifier does) means the (N,V) probabilities never exist
// next to the logits: the gradient overwrites the logits in place. For GPT-2's V = 50257 that is
// the largest activation of the model.
//
// Glossary: N rows (= B·T tokens), V vocabulary, z logits (N,V), y targets (N) in [0,V).
#pragma once

#include <cstdint>

namespace llmp {
namespace cpu {

/// Returns Σ_n loss_n (in double, unscaled). The logits (N,V) are consumed: when `backward` is
/// true they are OVERWRITTEN by dloss·(softmax(z) - onehot(y)), the gradient of dloss·Σ_n loss_n;
/// otherwise by exp(z - max z) (scratch). Precondition: 0 <= targets[n] < V.
double softmax_cross_entropy(float* logits, const int32_t* targets, int N, int V, float dloss,
                             bool backward);

}  // namespace cpu
}  // namespace llmp
