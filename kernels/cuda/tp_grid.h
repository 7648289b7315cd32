// The 2D / 2.5D tensor-parallel walk's kernels on the GPU: the twins of kernels/cpu/tp_grid.h
// (SUMMA's accumulation, a bias on a product's rows, and the passes of a LayerNorm whose rows are
// split over a group; Xu et al. 2021, Optimus, §3.3).
//
// Launch shapes: add_to and bias_add are grid-stride loops over the elements; the per-row passes
// are one warp per row (launch.h warp_per_row_blocks), lanes striding the row's Cl channels and
// warp_sum combining them, as layernorm.cu's dense kernels do; the arithmetic of each element is
// shared_math.h's (ln_mean, ln_rstd, ln_normalize, ln_dx).
// Glossary: N rows, Cl this rank's channels, C the whole row's. Device pointers, on stream(),
// asynchronous.
#pragma once

#include <cstdint>

namespace llmp {
namespace cuda {

/// y (n) += x (n).
void add_to(float* y, const float* x, int64_t n);
/// y (N,C) += b (C) on every row.
void bias_add(float* y, const float* b, long N, int C);
/// s (N) = Σ_c x (N,Cl) (OVERWRITTEN).
void layernorm_partial_sum(float* s, const float* x, long N, int Cl);
/// mean (N) = s/C, then s (N) = Σ_c (x - mean)² over the Cl channels (both OVERWRITTEN).
void layernorm_partial_sq(float* mean, float* s, const float* x, long N, int Cl, int C);
/// y (N,Cl) = (x - mean)·rstd·w + b, rstd = 1/sqrt(s/C + eps); mean_out, rstd_out if not null.
void layernorm_normalize(float* y, float* mean_out, float* rstd_out, const float* x,
                         const float* w, const float* b, const float* mean, const float* s,
                         long N, int Cl, int C);
/// s (2N) = [Σ_c dy·w | Σ_c dy·w·x̂] over the Cl channels (OVERWRITTEN).
void layernorm_backward_partial(float* s, const float* dy, const float* x, const float* w,
                                const float* mean, const float* rstd, long N, int Cl);
/// dx (N,Cl) += rstd·(dx̂ - s_n/C - x̂·s_{N+n}/C) (ACCUMULATED).
void layernorm_backward_apply(float* dx, const float* s, const float* dy, const float* x,
                              const float* w, const float* mean, const float* rstd, long N,
                              int Cl, int C);

}  // namespace cuda
}  // namespace llmp
