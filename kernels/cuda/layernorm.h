// LayerNorm over the channels on the GPU: the twin of kernels/cpu/layernorm.h (Ba, Kiros &
// Hinton 2016; GPT-2's eps = 1e-5, biased variance).
//
//   mean = Σ_c x_c / C,  rstd = 1/√(Σ_c (x_c - mean)²/C + eps),  y_c = (x_c - mean)·rstd·w_c + b_c
//   dx_c += rstd·(dx̂_c - mean_c(dx̂) - x̂_c·mean_c(dx̂·x̂)),  dx̂ = dy·w,  x̂ = (x - mean)·rstd
//
// Launch shape: one warp per row (launch.h warp_per_row_blocks): the 32 lanes stride over the
// row's C channels, the row sums are warp_sum shuffles, and the element steps are shared_math.h's
// ln_mean/ln_rstd/ln_normalize/ln_dx (checked against the CPU on the host). The mean is taken
// first and the variance from the centred values (two passes over the row, as the CPU twin), not
// E[x²] - mean², which cancels catastrophically for rows far from 0. The weight gradients are
// column sums over the N rows in two passes (column_sums.h): row slices, then the slices' sums
// per channel, each in a fixed order (deterministic).
// Glossary: N rows (= B·T tokens), C channels; w, b gain and bias (C). Device pointers, stream().
#pragma once

#include "common/tensor/tensor.h"

namespace llmp {
namespace cuda {

/// y (N,C) = layernorm(x (N,C))·w + b; saves mean (N) and rstd (N) (each may be nullptr). x and
/// y of dtype d (f32, f16 or bf16: a 16-bit x is widened in registers and y rounded once, as
/// kernels/cpu on fp32 copies); std::invalid_argument naming another d.
void layernorm_forward(void* y, float* mean, float* rstd, const void* x, const float* w,
                       const float* b, int N, int C, DType d = DType::kF32);

/// dx (N,C) = dres + ∂L/∂x (dres nullptr: dx itself, ACCUMULATED); dw (C) += Σ_rows dy·x̂ and
/// db (C) += Σ_rows dy unless dw is nullptr (then only the input gradient, the "B" half of a
/// zero-bubble backward). dy and x of dtype d (f32, f16 or bf16, widened in registers); dx and
/// dres of dx_dtype, f32 or d (a 16-bit dx: the fp32 sum rounded once); dw, db fp32.
/// std::invalid_argument naming another dtype.
void layernorm_backward(void* dx, float* dw, float* db, const void* dy, const void* x,
                        const float* w, const float* mean, const float* rstd, int N, int C,
                        DType d = DType::kF32, DType dx_dtype = DType::kF32,
                        const void* dres = nullptr);

/// The weight half alone ("W"): dw (C) += Σ_rows dy·x̂, db (C) += Σ_rows dy; dy, x as above.
void layernorm_backward_weight(float* dw, float* db, const void* dy, const void* x,
                               const float* mean, const float* rstd, int N, int C,
                               DType d = DType::kF32);

}  // namespace cuda
}  // namespace llmp
