// SUMMA: the Scalable Universal Matrix Multiplication Algorithm (van de Geijn & Watts 1997) on
// one q×q layer of the grid (grid_2p5d.h), the three products a linear layer needs forward and
// backward (Optimus, Xu et al. 2021, §3.1, Algorithms 1-3).
//
// Every matrix is in q×q blocks; rank (i,j) holds block (i,j) of each operand and of the result.
// For a linear layer y = x·W:   X (N_all, K) → blocks (N, Kl),  W (K, M) → blocks (Kl, Ml),
// Y (N_all, M) → blocks (N, Ml), with N = N_all/q rows, Kl = K/q, Ml = M/q.
//
//   AB   Y_ij  = Σ_k X_ik·W_kj:                             forward y = x·W
//        for k: broadcast X_ik along row i (root (i,k)), W_kj down column j (root (k,j)),
//        Y_ij += X_ik·W_kj.
//   ABT  C_il  = Σ_j A_ij·B_ljᵀ:                            dX = dY·Wᵀ (and the tied head)
//        for l: broadcast B_lj down column j (root (l,j)), T = A_ij·B_ljᵀ,
//        reduce T along row i to (i,l).
//   ATB  C_lj  = Σ_i A_ilᵀ·B_ij:                            dW = Xᵀ·dY
//        for l: broadcast A_il along row i (root (i,l)), T = A_ilᵀ·B_ij,
//        reduce T down column j to (l,j).
//
// Traffic per call (bytes each rank counts, broadcast and reduce S; q > 1, 0 at q = 1), q calls
// on each group:
//   AB   row: q·4·N·Kl       column: q·4·Kl·Ml
//   ABT  row: q·4·N·Kl (reduces)   column: q·4·Kl·Ml (broadcasts)    (A (N,Ml), B (Kl,Ml))
//   ATB  row: q·4·N·Kl (broadcasts) column: q·4·Kl·Ml (reduces)      (A (N,Kl), B (N,Ml))
// so a linear layer's forward + backward sends 12·N·K on the row group and 12·K·M/q on the
// column group, in 3q + 3q calls.
//
// On a device (the last argument, Device::kCUDA): every pointer is that device's memory, the
// broadcast and product buffers are allocated there, each step's product goes through
// kernel_ops(device) into a scratch block and is added with KernelOps::add_to (the same
// order of sums as on the CPU), and the broadcasts and reduces get device tensors (the MPI
// backend stages them: a broadcast copies down at its root and up at the others, a reduce
// down at every rank and up at its root).
//
// Glossary: q grid side, (i,j) this rank's row and column, N rows per block, Kl, Ml the
// block widths of the inner and outer dimension.
#pragma once

#include <cstdint>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// Y (N,Ml) = Σ_k X_ik (N,Kl) · W_kj (Kl,Ml), OVERWRITTEN. `row`: the ranks (i,*), group rank =
/// column; `col`: the ranks (*,j), group rank = row. q broadcasts on each.
void summa_ab(ProcessGroup& row, ProcessGroup& col, float* Y, const float* X, const float* W,
              int64_t N, int Kl, int Ml, Device device = Device::kCPU);

/// C (N,Kl) = Σ_j A_ij (N,Ml) · B_ljᵀ (Ml,Kl) for this rank's (i,l = its column), OVERWRITTEN.
/// q broadcasts on `col`, q reduces on `row`.
void summa_abt(ProcessGroup& row, ProcessGroup& col, float* C, const float* A, const float* B,
               int64_t N, int Ml, int Kl, Device device = Device::kCPU);

/// C (Kl,Ml) += Σ_i A_ilᵀ (Kl,N) · B_ij (N,Ml) for this rank's (l = its row, j), ACCUMULATED.
/// q broadcasts on `row`, q reduces on `col`.
void summa_atb(ProcessGroup& row, ProcessGroup& col, float* C, const float* A, const float* B,
               int64_t N, int Kl, int Ml, Device device = Device::kCPU);

}  // namespace llmp
