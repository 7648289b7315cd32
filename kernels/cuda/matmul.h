// Fully connected layer on the GPU: the twin of kernels/cpu/matmul.h, same signatures and
// semantics, device pointers. y = x @ W + b and its backward.
//
// Why cuBLAS: the GEMMs are ~90% of the model's FLOPs and cuBLAS runs them near peak; writing a
// competitive GEMM is a course of its own. The cuBLAS arguments of each product (row-major
// buffers through a column-major library) are derived in gemm_args.cc and checked on the host by
// gemm_args_test. fp32 buffers throughout; set_tf32(true) (context.h) lets the tensor cores use
// TF32; inside a SixteenBitOperands scope (operands that are bf16/fp16 values) the products run on
// exact 16-bit copies of the operands, on 16-bit tensor cores, into the same fp32 outputs.
// The bias: broadcast into y by a small kernel, then the GEMM accumulates (β = 1), as the CPU
// twin does; db += Σ_rows dy by residual_bias_backward's column-sum kernel.
//
// Launch shape: cuBLAS; the bias broadcast is a grid-stride loop over N·OC elements.
// Glossary: N rows (= B·T tokens), C input features, OC output features.
// Layout: x (N,C), W (C,OC) row-major, b (OC), y (N,OC). All calls on stream(), asynchronous.
#pragma once

namespace llmp {
namespace cuda {

/// y (N,OC) = x (N,C) @ W (C,OC) + b (OC). bias may be nullptr. y must not alias x.
void matmul_forward(float* y, const float* x, const float* W, const float* bias, int N, int C,
                    int OC);

/// dx (N,C) = dy @ Wᵀ OVERWRITTEN (skipped when dx == nullptr); dW (C,OC) += xᵀ @ dy;
/// db (OC) += Σ_rows dy (skipped when db == nullptr).
void matmul_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                     const float* W, int N, int C, int OC);

/// dx (N,C) = dy (N,OC) @ Wᵀ, W (C,OC). OVERWRITES dx.
void matmul_backward_input(float* dx, const float* dy, const float* W, int N, int C, int OC);

/// dW (C,OC) += xᵀ (C,N) @ dy (N,OC);  db (OC) += Σ_rows dy (skipped when db == nullptr).
void matmul_backward_weight(float* dW, float* db, const float* dy, const float* x, int N, int C,
                            int OC);

/// y (N,OC) = x (N,C) @ Wtᵀ, Wt (OC,C): the tied LM head (Press & Wolf 2017).
void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC);

/// dx (N,C) = dy @ Wt OVERWRITTEN (skipped when dx == nullptr); dWt (OC,C) += dyᵀ @ x.
void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                        int N, int C, int OC);

}  // namespace cuda
}  // namespace llmp
