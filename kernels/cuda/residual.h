// The residual connection with the row-parallel layer's bias folded in, on the GPU: the twin of
// kernels/cpu/residual.h (He et al. 2016; the bias after the tensor-parallel sum, Shoeybi et al.
// 2019 §3).
//
//   out = x + y + b        db += Σ_rows dy
//
// Launch shape: residual_bias_add is a grid-stride loop over N·C elements; the bias gradient is
// a column sum in two passes (column_sums.h: slices of rows, a warp reading 32 consecutive floats
// of a row, then the slices' sums per column in a fixed order: deterministic). matmul.cu uses
// the same column sum for its db.
// Glossary: N rows (tokens), C channels. Device pointers, on stream(), asynchronous.
#pragma once

#include "common/tensor/tensor.h"

namespace llmp {
namespace cuda {

/// out (N,C) = x (N,C) + y (N,C) + b (C), out, x, y of dtype d (f32, f16 or bf16: the sum in
/// fp32, rounded once). out may alias x or y. std::invalid_argument naming another d.
void residual_bias_add(void* out, const void* x, const void* y, const float* b, long N, int C,
                       DType d = DType::kF32);

/// db (C) += Σ_rows dy (N,C) (ACCUMULATED), dy of dy_dtype (f32, f16 or bf16, widened in
/// registers).
void residual_bias_backward(float* db, const void* dy, long N, int C,
                            DType dy_dtype = DType::kF32);

}  // namespace cuda
}  // namespace llmp
