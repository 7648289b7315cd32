// The element and per-row kernels of the 2D / 2.5D tensor-parallel walk (common/tp2d,
// common/tp_grid) that common/nn's kernels do not cover: SUMMA's accumulation of its per-step
// products, a bias added to a product's rows, and the LayerNorm of a row whose C channels are
// split over a group of ranks, in the passes between which the caller all-reduces partial row
// sums (Xu et al. 2021, Optimus, §3.3; Ba, Kiros & Hinton 2016):
//
//   forward : s_n = Σ_c x_nc (partial)      -> all_reduce ->  mean_n = s_n/C,
//             s_n = Σ_c (x_nc - mean_n)² (partial) -> all_reduce ->
//             y_nc = (x_nc - mean_n)·rstd_n·w_c + b_c,  rstd_n = 1/sqrt(s_n/C + eps)
//   backward: x̂ = (x - mean)·rstd, dx̂ = dy·w,
//             s_n = Σ_c dx̂_nc, s_{N+n} = Σ_c dx̂_nc·x̂_nc (partial) -> all_reduce ->
//             dx_nc += rstd_n·(dx̂_nc - s_n/C - x̂_nc·s_{N+n}/C)
//
// Raw float pointers, row-major; every pointer is memory of the table's device when called
// through KernelOps (kernels/ops/kernel_ops.h), whose entries of the same names these are.
// Glossary: N rows, Cl this rank's channels of a row, C the whole row's channels.
#pragma once

#include <cstdint>

namespace llmp {
namespace cpu {

/// y (n) += x (n), element by element (SUMMA's Y += X_ik·W_kj after each step's product).
void add_to(float* y, const float* x, int64_t n);

/// y (N,C) += b (C) on every row (a linear layer's bias after a SUMMA product).
void bias_add(float* y, const float* b, long N, int C);

/// s (N) = Σ_c x (N,Cl) over this rank's Cl channels of each row (OVERWRITTEN).
void layernorm_partial_sum(float* s, const float* x, long N, int Cl);

/// Given s (N) the whole rows' Σ_c x: mean (N) = s/C, then s (N) = Σ_c (x - mean)² over this
/// rank's Cl channels (both OVERWRITTEN).
void layernorm_partial_sq(float* mean, float* s, const float* x, long N, int Cl, int C);

/// Given mean (N) and s (N) the whole rows' Σ_c (x - mean)²: y (N,Cl) = (x - mean)·rstd·w + b
/// with rstd = 1/sqrt(s/C + kLayerNormEps); mean_out, rstd_out (N) written when not nullptr.
void layernorm_normalize(float* y, float* mean_out, float* rstd_out, const float* x,
                         const float* w, const float* b, const float* mean, const float* s,
                         long N, int Cl, int C);

/// s (2N) = [Σ_c dx̂ | Σ_c dx̂·x̂] over this rank's Cl channels (OVERWRITTEN), dx̂ = dy·w,
/// x̂ = (x - mean)·rstd.
void layernorm_backward_partial(float* s, const float* dy, const float* x, const float* w,
                                const float* mean, const float* rstd, long N, int Cl);

/// Given s (2N) the whole rows' sums: dx (N,Cl) += rstd·(dx̂ - s_n/C - x̂·s_{N+n}/C)
/// (ACCUMULATED).
void layernorm_backward_apply(float* dx, const float* s, const float* dy, const float* x,
                              const float* w, const float* mean, const float* rstd, long N,
                              int Cl, int C);

}  // namespace cpu
}  // namespace llmp
