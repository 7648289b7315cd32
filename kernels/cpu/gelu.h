// GELU activation, tanh approximation (the one GPT-2 was trained with), forward and backward.
//
//   gelu(x) = ½·x·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³)
//   gelu'(x) = ½·(1 + tanh(u)) + ½·x·(1 - tanh²(u))·√(2/π)·(1 + 3·0.044715·x²)
//
// Hendrycks & Gimpel 2016 ("Gaussian Error Linear Units"); as in llm.c's gelu_forward/backward.
//
// Glossary: N number of elements (B·T·4C in the MLP).
#pragma once

namespace llmp {
namespace cpu {

/// y (N) = gelu(x (N)). y may alias x.
void gelu_forward(float* y, const float* x, long N);

/// dx (N) = gelu'(x) · dy (OVERWRITTEN). dx may alias dy (in-place backward).
void gelu_backward(float* dx, const float* x, const float* dy, long N);

}  // namespace cpu
}  // namespace llmp
