// The residual connection of a pre-LN transformer sub-layer, with the bias of the sub-layer's
// last (row-parallel) linear layer folded in:
//
//   out = x + y + b        x, y, out (N,C), b (C)
//
// The bias is added here rather than inside the product because under tensor parallelism y is a
// sum over ranks of partial products (Megatron-LM's row-parallel layer, Shoeybi et al. 2019 §3):
// the bias must be added once, after that sum. He et al. 2016 (residual connections).
//
// Glossary: N rows (tokens), C channels.
#pragma once

namespace llmp {
namespace cpu {

/// out (N,C) = x (N,C) + y (N,C) + b (C). out may alias x or y.
void residual_bias_add(float* out, const float* x, const float* y, const float* b, long N, int C);

/// Its bias gradient: db (C) += Σ_rows dy (N,C) (ACCUMULATED). (dx = dy and the gradient of y
/// is dy too: the residual passes the gradient through unchanged.)
void residual_bias_backward(float* db, const float* dy, long N, int C);

}  // namespace cpu
}  // namespace llmp
