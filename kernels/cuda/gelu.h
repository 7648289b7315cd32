// GELU (tanh approximation) on the GPU: the twin of kernels/cpu/gelu.h (Hendrycks & Gimpel 2016).
//
//   gelu(x) = ½·x·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³)
//   gelu'(x) = ½·(1 + tanh(u)) + ½·x·(1 - tanh²(u))·√(2/π)·(1 + 3·0.044715·x²)
//
// The element formulas are shared_math.h's gelu()/gelu_grad(), checked against the CPU on the
// host. Launch shape: grid-stride loop over N elements (launch.h elementwise_blocks).
// Glossary: N elements (B·T·4C in the MLP). Device pointers, on stream(), asynchronous.
#pragma once

#include "common/tensor/tensor.h"

namespace llmp {
namespace cuda {

/// y (N) = gelu(x (N)), both of dtype d (f32, f16 or bf16: a 16-bit x is widened in registers,
/// y rounded once, as kernels/cpu on fp32 copies). y may alias x. std::invalid_argument naming
/// another d.
void gelu_forward(void* y, const void* x, long N, DType d = DType::kF32);

/// dx (N) = gelu'(x) · dy (OVERWRITTEN), x of x_dtype (f32, f16 or bf16, widened in registers),
/// dx of dx_dtype: f32, or x_dtype (a 16-bit dx rounded once). An f32 dx may alias dy.
/// std::invalid_argument naming another dtype.
void gelu_backward(void* dx, const void* x, const float* dy, long N, DType x_dtype = DType::kF32,
                   DType dx_dtype = DType::kF32);

}  // namespace cuda
}  // namespace llmp
