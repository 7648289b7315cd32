// LayerNorm when the channels of a row are split over a group of ranks: the multi-dimensional
// tensor-parallel methods (Optimus 2D, Tesseract 2.5D, 3D; Colossal-AI's LayerNorm2D/3D) keep
// the activations in column blocks, so no rank holds a whole row of C channels.
//
//   mean = Σ_c x_c / C,  var = Σ_c (x_c - mean)² / C,  y_c = (x_c - mean)·rstd·w_c + b_c
//
// Each rank holds `cols` of the C channels for the same `rows` rows; the row sums are partial and
// are all-reduced over `group` (the ranks holding the other column blocks of the same rows):
//   forward : all_reduce Σ_c x_c, then all_reduce Σ_c (x_c - mean)²   (two-pass, as the dense
//             kernel: the same numbers up to the order of the sums), 2 calls of `rows` floats;
//   backward: all_reduce [Σ_c dx̂_c | Σ_c dx̂_c·x̂_c] in one call of 2·rows floats,
//             dx = rstd·(dx̂ - mean_c(dx̂) - x̂·mean_c(dx̂·x̂)),  dx̂ = dy·w.
// Each all_reduce sends 2(n-1)/n·S bytes per rank (S the buffer's bytes, n = group.size()).
// On a group of one rank this is kernels/cpu/layernorm.h exactly.
// On a device (`device`, Device::kCUDA): every pointer is that device's memory; the passes
// between the all_reduces are KernelOps entries (kernels/cpu/tp_grid.h: layernorm_partial_sum,
// _partial_sq, _normalize, _backward_partial, _backward_apply) of kernel_ops(device), and the
// all_reduced buffers are device tensors (the MPI backend stages each down and up: 4N, 4N
// forward, 8N backward each way).
//
// Ba, Kiros & Hinton 2016; the split follows Xu et al. 2021 (Optimus), §3.3.
// Glossary: N = rows, Cl = cols (this rank's channels), C the whole row's channels, n ranks.
#pragma once

#include <cstdint>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// y (N,Cl) = layernorm over the whole C of x (N,Cl)·w + b, w and b this rank's Cl entries;
/// saves mean (N) and rstd (N), the same on every rank of `group`. Collective over `group`
/// (2 all_reduces of N floats). Throws std::invalid_argument when Cl·group.size() != C.
void grid_layernorm_forward(ProcessGroup& group, float* y, float* mean, float* rstd,
                            const float* x, const float* w, const float* b, int64_t N, int Cl,
                            int C, Device device = Device::kCPU);

/// Given dy (N,Cl): dx (N,Cl) += ∂L/∂x (ACCUMULATED, like cpu::layernorm_backward), and, when dw
/// is not nullptr, dw (Cl) += Σ_rows dy·x̂, db (Cl) += Σ_rows dy over this rank's rows only (the
/// caller reduces them over ranks holding other rows). Collective over `group` (1 all_reduce of
/// 2N floats).
void grid_layernorm_backward(ProcessGroup& group, float* dx, float* dw, float* db, const float* dy,
                             const float* x, const float* w, const float* mean, const float* rstd,
                             int64_t N, int Cl, int C, Device device = Device::kCPU);

}  // namespace llmp
