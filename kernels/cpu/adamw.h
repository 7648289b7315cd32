// The AdamW update of one contiguous range of elements, with one weight decay for the range.
//
// Loshchilov & Hutter 2019, Algorithm 2, with the bias corrections given as factors:
//   m ← β1·m + (1-β1)·g      v ← β2·v + (1-β2)·g²
//   p ← p - lr·( m·c1 / (√(v·c2) + ε) + λ·p )      c1 = 1/(1-β1^t), c2 = 1/(1-β2^t)
// common/optim/adamw.h owns the optimizer (its state, the decay ranges, the step count) and calls
// this once per range of constant λ, through the kernels of the state's device
// (kernels/ops/kernel_ops.h); the CUDA twin is kernels/cuda.
//
// Glossary: n elements, p parameters, g gradients, m and v Adam's moments, λ weight decay.
#pragma once

#include <cstdint>

namespace llmp {
namespace cpu {

/// p, m, v (n each) updated in place from g (n). Element-wise, in fp32.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float c1, float c2);

}  // namespace cpu
}  // namespace llmp
