// Layer normalisation over the channel dimension, forward and backward.
//
//   mean = Σ_c x_c / C,  rstd = 1/sqrt(Σ_c (x_c - mean)² / C + eps),  y_c = (x_c - mean)·rstd·w_c +
//   b_c
//
// Ba, Kiros & Hinton 2016 ("Layer Normalization"); GPT-2 applies it before attention and the MLP
// (pre-LN) and once more before the head. eps = 1e-5 as in GPT-2. The math follows llm.c.
//
// Glossary: N rows (= B·T tokens), C channels; w, b are the learned gain and bias (C).
#pragma once

namespace llmp {
namespace cpu {

/// LayerNorm epsilon (GPT-2's 1e-5).
constexpr float kLayerNormEps = 1e-5f;

/// y (N,C) = layernorm(x (N,C))·w + b; saves mean (N) and rstd (N) for the backward.
/// mean/rstd may be nullptr when no backward follows.
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int N, int C);

/// Given dy (N,C): dx (N,C) += ∂L/∂x (ACCUMULATED, so a residual branch can add into the stream),
/// dw (C) += Σ_rows dy·x̂, db (C) += Σ_rows dy, where x̂ = (x - mean)·rstd.
///   dx = rstd·(dx̂ - mean_c(dx̂) - x̂·mean_c(dx̂·x̂)),  dx̂ = dy·w
/// dw and db may be nullptr: only the input gradient (the "B" half of a zero-bubble backward).
void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                        const float* w, const float* mean, const float* rstd, int N, int C);

/// The weight half alone ("W"): dw (C) += Σ_rows dy·x̂, db (C) += Σ_rows dy, with x̂ recomputed
/// from the forward's mean and rstd (N). Same sums, in the same order, as layernorm_backward's.
/// db may be nullptr (only dw).
void layernorm_backward_weight(float* dw, float* db, const float* dy, const float* x,
                               const float* mean, const float* rstd, int N, int C);

}  // namespace cpu
}  // namespace llmp
