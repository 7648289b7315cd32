// Softmax cross-entropy over the vocabulary on the GPU, in the steps of the CPU twin
// (kernels/cpu/cross_entropy.h: the same meaning of v0, Vr, m, sums, dloss, backward and
// grad_dtype, so a vocabulary split over tensor-parallel ranks all-reduces m with max and sums
// with sum between the steps; Megatron-LM's vocab-parallel cross-entropy, Shoeybi et al. 2019 §3).
//
//   loss_n = m_n + log Σ_v exp(z_nv - m_n) - z_n[y_n],   ∂loss_n/∂z_n = softmax(z_n) - onehot(y_n)
//
// What a step costs is its passes over the logits, (N, Vr) fp32, the largest activation (GPT-2
// at batch 8 × 1024: 8,192 × 50,304 × 4 bytes = 1.6 GB per pass, ~0.5 ms of an H100's memory
// bandwidth). A rank holding the whole vocabulary reads them once for m and the sums
// (cross_entropy_max_sums: each thread keeps a running max and a sum rescaled whenever the max
// grows, the online softmax of Milakov & Gimelshein 2018, merged over the block at the end), and
// once more, writing the gradient, in step 3, which recomputes exp(z - m) and rounds the gradient
// to 16-bit values itself when asked. A split vocabulary pays one read more (steps 1 and 2
// apart, a reduction between them). Before (up to commit fb39e8f): step 2 wrote exp(z - m) over
// the logits and a separate pass rounded the gradient, 7 passes where there are now 3.
//
// Launch shape: one block of kThreads per row (a row is Vr ~ 50k logits for GPT-2: one warp
// would loop 1500 times), block_max/block_sum through shared memory. Step 3's per-row losses
// (double, shared_math.h ce_row_loss) go to the workspace and one block sums them; the total is
// copied back (one double), which synchronises stream().
// Glossary: N rows, Vr logits of this rank per row, v0 its first vocabulary row, z (N,Vr),
// y (N) targets in [0,V), m (N), sums (2N). All arrays are DEVICE arrays.
#pragma once

#include <cstdint>

#include "common/tensor/tensor.h"

namespace llmp {
namespace cuda {

/// Step 1: m (N) = max over this rank's logits of each row, z (N,Vr).
void cross_entropy_row_max(float* m, const float* z, int N, int Vr);

/// Step 2: sums (2N) = [ Σ_v exp(z_nv - m_n) | z_n[y_n] when y_n ∈ [v0, v0+Vr), else 0 ]. z is
/// only read.
void cross_entropy_exp_sums(float* sums, const float* z, const int32_t* y, int v0, int N, int Vr,
                            const float* m);

/// Steps 1 and 2 in one read of z (the whole vocabulary on this rank): m and sums as above.
void cross_entropy_max_sums(float* m, float* sums, const float* z, const int32_t* y, int v0,
                            int N, int Vr);

/// Step 3: returns Σ_n loss_n (double, on the host). With `backward`, z (the logits) is
/// OVERWRITTEN by dloss·(softmax - onehot), rounded to values of grad_dtype (f32: not rounded).
/// Synchronises stream(). Throws std::invalid_argument for a grad_dtype not f32, f16 or bf16.
double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                          const float* sums, float dloss, bool backward, DType grad_dtype);

}  // namespace cuda
}  // namespace llmp
