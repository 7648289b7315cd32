// Fully connected layer (a "Linear" / Conv1D in HF GPT-2): y = x @ W + b, forward and backward.
//
// Every weight matrix of the GPT (c_attn, attn.c_proj, c_fc, mlp.c_proj) goes through here, and so
// do ~90% of the model's FLOPs: 2·N·C·OC forward, 4·N·C·OC backward. The products are Eigen GEMMs
// on row-major Maps of the raw buffers (single-threaded: EIGEN_DONT_PARALLELIZE; the parallelism
// this project teaches is across ranks, not threads). Math as in llm.c's matmul_forward/backward.
//
// Glossary: N rows (= B·T tokens), C input features, OC output features.
// Layout: x (N,C), W (C,OC) stored (in, out) row-major, b (OC), y (N,OC).
#pragma once

namespace llmp {
namespace cpu {

/// y (N,OC) = x (N,C) @ W (C,OC) + b (OC). bias may be nullptr (no bias). y must not alias x.
void matmul_forward(float* y, const float* x, const float* W, const float* bias, int N, int C,
                    int OC);

/// Backward of matmul_forward, given dy (N,OC): matmul_backward_input then
/// matmul_backward_weight.
///   dx (N,C)  = dy @ W^T            OVERWRITTEN (skipped when dx == nullptr)
///   dW (C,OC) += x^T @ dy           accumulated
///   db (OC)   += Σ_rows dy          accumulated (skipped when db == nullptr)
void matmul_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                     const float* W, int N, int C, int OC);

/// The input-gradient half ("B" of zero-bubble pipelines, Qi et al. 2024 §2), on the critical
/// path: dx (N,C) = dy (N,OC) @ Wᵀ, W (C,OC). OVERWRITES dx.
void matmul_backward_input(float* dx, const float* dy, const float* W, int N, int C, int OC);

/// The weight-gradient half ("W"), needed only by the optimizer step:
/// dW (C,OC) += xᵀ (C,N) @ dy (N,OC);  db (OC) += Σ_rows dy (skipped when db == nullptr).
void matmul_backward_weight(float* dW, float* db, const float* dy, const float* x, int N, int C,
                            int OC);

/// The same layer with the weight stored transposed, Wt (OC,C): y (N,OC) = x (N,C) @ Wtᵀ.
/// This is the tied LM head, logits = ln_f(x) @ wteᵀ with wte (V,C) (Press & Wolf 2017).
void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC);

/// Backward of matmul_nt_forward, given dy (N,OC):
///   dx (N,C)   = dy @ Wt            OVERWRITTEN (skipped when dx == nullptr)
///   dWt (OC,C) += dyᵀ @ x           accumulated
void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                        int N, int C, int OC);

}  // namespace cpu
}  // namespace llmp
