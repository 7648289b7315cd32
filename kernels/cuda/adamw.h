// The AdamW update on the GPU: the device twin of kernels/cpu/adamw.h (and of the CPU table's
// adamw_update_mixed, kernels/ops/cpu_kernel_ops.cc), on fp32 state m, v (and the fp32 master copy
// under mixed precision), n elements with ONE weight decay per call.
//
// Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", Algorithm 2:
//   m ← β1·m + (1-β1)·g            v ← β2·v + (1-β2)·g²
//   p ← p - lr·( m·c1 / (√(v·c2) + ε) + λ·p )      c1 = 1/(1-β1^t), c2 = 1/(1-β2^t)
// The element update is shared_math.h adamw_element (checked against AdamW::step on the host,
// shared_math_test). The split of a span into runs of constant λ (decayed matrices, undecayed
// biases and LayerNorm) is common/optim/adamw.cc's, the same on every device: it calls these
// once per run, through the kernel table (cuda_ops.cu), ~2L+3 launches a step for a GPT.
// Mixed precision (Micikevicius et al. 2018 §3.1): g = widen(g16)·grad_scale, the update runs on
// the fp32 master, then p16 = round(master) (round to nearest even, shared_math.h), in one pass.
// Launch shape: one grid-stride launch (launch.h elementwise_blocks); nothing for n = 0.
// Glossary: n elements, λ weight decay, t step (1-based). Every pointer is device memory.
#pragma once

#include <cstdint>

#include "common/tensor/tensor.h"

namespace llmp {
namespace cuda {

/// p, m, v (n each, fp32) updated in place from g (n, fp32), with weight decay `weight_decay`
/// and the bias corrections c1, c2. Same signature and semantics as cpu::adamw_update.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float c1, float c2);

/// Mixed precision: g = widen(grads16[i])·grad_scale (grads in grad_dtype: f32, f16 or bf16),
/// the update of master[i] with m[i], v[i], then params16[i] = round(master[i]) in param_dtype
/// (f32, f16 or bf16). Throws std::invalid_argument naming a dtype that is none of these.
void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16, DType grad_dtype,
                        float grad_scale, float* master, float* m, float* v, int64_t n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, float c1,
                        float c2);

}  // namespace cuda
}  // namespace llmp
