// Softmax cross-entropy over the vocabulary on the GPU, in the three steps of the CPU twin
// (kernels/cpu/cross_entropy.h: the same meaning of v0, Vr, m, sums, dloss and backward, so a
// vocabulary split over tensor-parallel ranks all-reduces m with max and sums with sum between
// the steps; Megatron-LM's vocab-parallel cross-entropy, Shoeybi et al. 2019 §3).
//
//   loss_n = m_n + log Σ_v exp(z_nv - m_n) - z_n[y_n],   ∂loss_n/∂z_n = softmax(z_n) - onehot(y_n)
//
// Launch shape: one block of kThreads per row (a row is Vr ~ 50k logits for GPT-2: one warp
// would loop 1500 times), block_max/block_sum through shared memory. Step 3's per-row losses
// (double, shared_math.h ce_row_loss) go to the workspace and one block sums them; the total is
// copied back (one double), which synchronises stream().
// Glossary: N rows, Vr logits of this rank per row, v0 its first vocabulary row, z (N,Vr),
// y (N) targets in [0,V), m (N), sums (2N). All arrays are DEVICE arrays.
#pragma once

#include <cstdint>

namespace llmp {
namespace cuda {

/// Step 1: m (N) = max over this rank's logits of each row, z (N,Vr).
void cross_entropy_row_max(float* m, const float* z, int N, int Vr);

/// Step 2: z ← exp(z - m) in place; sums (2N) = [ Σ_v exp(z_nv - m_n) | z_n[y_n] when
/// y_n ∈ [v0, v0+Vr), else 0 ].
void cross_entropy_exp_sums(float* sums, float* z, const int32_t* y, int v0, int N, int Vr,
                            const float* m);

/// Step 3: returns Σ_n loss_n (double, on the host). With `backward`, z (holding exp(z - m))
/// is OVERWRITTEN by dloss·(softmax - onehot). Synchronises stream().
double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                          const float* sums, float dloss, bool backward);

}  // namespace cuda
}  // namespace llmp
