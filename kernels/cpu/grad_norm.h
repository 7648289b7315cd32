// The squared L2 norm of a gradient span, the one reduction global-norm clipping needs
// (common/optim/grad_clip.h): ‖g‖² = Σ_i g_i², accumulated in double.
//
// Why double: a GPT-2 gradient has 1.2e8 elements; an fp32 running sum of that many positive
// terms loses the small ones once it is 2^24 times larger (torch.nn.utils.clip_grad_norm_ sums
// per-tensor norms in fp32 and is looser for it). The CUDA twin (kernels/cuda/reduce.h
// sum_of_squares) also accumulates in double, in another order: the two agree to ~1e-12
// relative, not bit for bit.
//
// Glossary: n elements, g a gradient.
#pragma once

#include <cstdint>

namespace llmp {
enum class DType;
}

namespace llmp::cpu {

/// Σ_i x_i² over x[0..n), x of dtype f32, f16 or bf16 (widened exactly), in double. Throws
/// std::invalid_argument naming any other dtype. n = 0: 0.
double sum_of_squares(const void* x, DType dtype, int64_t n);

}  // namespace llmp::cpu
