// Fully connected layer on the GPU: the twin of kernels/cpu/matmul.h, same signatures and
// semantics, device pointers. y = x @ W + b and its backward.
//
// Why cuBLAS: the GEMMs are ~90% of the model's FLOPs and cuBLAS runs them near peak; writing a
// competitive GEMM is a course of its own. The cuBLAS arguments of each product (row-major
// buffers through a column-major library) are derived in gemm_args.cc and checked on the host by
// gemm_args_test. fp32 buffers by default; set_tf32(true) (context.h) lets the tensor cores use
// TF32; inside a SixteenBitOperands scope (operands that are bf16/fp16 values) the products run on
// 16-bit tensor cores: on the activations where they are stored in 16 bits (the stored overloads
// below, a 16-bit y or dx written by the GEMM itself), on exact 16-bit copies of fp32 operands
// otherwise (or their noted 16-bit sources), into fp32 outputs.
// The bias: broadcast into y by a small kernel, then the GEMM accumulates (β = 1), as the CPU
// twin does; db += Σ_rows dy by residual_bias_backward's column-sum kernel.
//
// Launch shape: cuBLAS; the bias broadcast is a grid-stride loop over N·OC elements.
// Glossary: N rows (= B·T tokens), C input features, OC output features.
// Layout: x (N,C), W (C,OC) row-major, b (OC), y (N,OC). All calls on stream(), asynchronous.
#pragma once

#include "common/tensor/tensor.h"

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

/// The three above with the activations as stored (kernels/ops/kernel_ops.h Act): x, y, dy, dx
/// each f32, or 16-bit of the type a SixteenBitOperands scope declared (context.h), which the
/// product reads or writes as it is: a 16-bit operand is cuBLAS's A or B without a copy, a
/// 16-bit y or dx its C (the fp32 accumulation rounded once, to nearest even). With a 16-bit y
/// the bias is first broadcast into y in 16 bits and accumulated with β = 1: the fp32 y + b
/// rounded once, as the CPU computes it, when b holds values of that type (the declaration
/// promises it; kernels/cpu's table checks it). W, bias, dW and db stay fp32. Throws
/// std::invalid_argument naming the entry and the argument for a 16-bit dtype that is not the
/// declared one (none declared included), and for a dtype none of f32, f16, bf16.
void matmul_forward(void* y, DType y_dtype, const void* x, DType x_dtype, const float* W,
                    const float* bias, int N, int C, int OC);
void matmul_backward_input(void* dx, DType dx_dtype, const void* dy, DType dy_dtype,
                           const float* W, int N, int C, int OC);
void matmul_backward_weight(float* dW, float* db, const void* dy, DType dy_dtype, const void* x,
                            DType x_dtype, int N, int C, int OC);

/// y (N,OC) = x (N,C) @ Wtᵀ, Wt (OC,C): the tied LM head (Press & Wolf 2017).
void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC);

/// dx (N,C) = dy @ Wt OVERWRITTEN (skipped when dx == nullptr); dWt (OC,C) += dyᵀ @ x.
void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                        int N, int C, int OC);

}  // namespace cuda
}  // namespace llmp
