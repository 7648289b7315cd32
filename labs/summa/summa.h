// Lab summa: the adapter header. The tests call summa_forward() and summa_backward() and nothing
// else (besides make_summa_grid, given in summa_grid.h), so you may organise your code as you like
// behind them.
//
// SUMMA (van de Geijn & Watts 1997, "SUMMA: Scalable Universal Matrix Multiplication Algorithm",
// §2) for one linear layer Y = X·W, as Optimus, Colossal-AI's 2D tensor parallelism, runs every
// linear layer of a transformer (Xu et al. 2021, "An Efficient 2D Method for Training Super-Large
// Deep Learning Models", §3.1, Algorithms 1 and 2). X (M, K), W (K, N) and Y (M, N) are cut into
// q×q blocks; rank (i, j) of the grid holds X_ij (M/q, K/q), W_ij (K/q, N/q) and must produce
// Y_ij (M/q, N/q). Nobody ever holds a whole matrix.
//
//   Y_ij = Σ_k X_ik · W_kj       X_ik lives on rank (i, k), in this rank's ROW;
//                                W_kj lives on rank (k, j), in this rank's COLUMN.
//
// So in step k = 0 .. q-1 the row's rank (i, k) broadcasts X_ik along its row, the column's rank
// (k, j) broadcasts W_kj along its column, and every rank adds the product of the two blocks it
// received to its Y_ij. Backward (§3.1, Algorithm 2) uses the transposed variants, where a local
// product gives a PARTIAL block of someone else's result and a reduce delivers the sum:
//
//   dX_ik = Σ_j dY_ij · W_kjᵀ    step k: broadcast W_kj down column j from rank (k, j); rank
//                                (i, j) computes dY_ij · W_kjᵀ (M/q, K/q); reduce (sum) along
//                                row i to rank (i, k), which ends with dX_ik.
//   dW_kj = Σ_i X_ikᵀ · dY_ij    step k: broadcast X_ik along row i from rank (i, k); rank (i, j)
//                                computes X_ikᵀ · dY_ij (K/q, N/q); reduce (sum) along column j
//                                to rank (k, j), which ends with dW_kj.
//
// Traffic per rank (ProcessGroup counts a broadcast and a reduce as S bytes on every rank of the
// group, S = the block's bytes; q = 1 counts the calls with 0 bytes):
//   forward    row group: q broadcasts of (M/q, K/q): 4MK/q bytes; column group: q broadcasts of
//              (K/q, N/q): 4KN/q bytes. 2q calls.
//   backward   row group: q broadcasts of X blocks + q reduces of dX blocks: 8MK/q bytes;
//              column group: q broadcasts of W blocks + q reduces of dW blocks: 8KN/q bytes.
//              4q calls.
// Nothing else: no all_reduce, no world group.
//
// Glossary: P = q² ranks, (i, j) = (grid.i, grid.j) this rank, k the SUMMA step, M rows of X and
// Y (tokens, B·T), K = in features, N = out features; m = M/q, kb = K/q, n = N/q the block
// sides. Matrices are row-major f32, weights stored (in, out) as in kernels/cpu/matmul.h.
#pragma once

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"
#include "labs/summa/summa_grid.h"

namespace llmp {

/// Forward of Y = X·W by SUMMA. Returns Y_ij (m, n), a new tensor (MemCategory::kActivations):
///   Y_ij = Σ_{k=0}^{q-1} X_ik · W_kj
/// x: X_ij (m, kb); w: W_ij (kb, n); host f32, contiguous; not modified.
/// Collective over grid.row and grid.col: every rank of the grid calls it with the same m, kb, n.
/// Traffic: exactly q broadcasts on grid.row (4·m·kb bytes each) and q on grid.col (4·kb·n
/// each), nothing else.
/// Errors: x not 2-D, w not (x.dim(1), ·) end every rank with LLMP_CHECK naming both shapes.
Tensor summa_forward(const Tensor& x, const Tensor& w, SummaGrid& grid);

/// Backward of summa_forward, given dy = dY_ij (m, n). Returns dX_ij (m, kb), a new tensor, and
/// ACCUMULATES (+=) dW_ij (kb, n) into `dw` (the caller zeroes it between steps):
///   dX_ij  = Σ_k dY_ik · W_jkᵀ        (this rank's block of dY·Wᵀ)
///   dW_ij += Σ_k X_kiᵀ · dY_kj        (this rank's block of Xᵀ·dY)
/// computed by the broadcast + local product + reduce steps above.
/// x, w: as passed to summa_forward; dw: (kb, n) f32.
/// Collective over grid.row and grid.col.
/// Traffic: exactly q broadcasts and q reduces on each of grid.row (8·m·kb bytes in all) and
/// grid.col (8·kb·n), nothing else.
/// Errors: dy not (m, n) or dw not (kb, n) end every rank with LLMP_CHECK naming the shapes.
Tensor summa_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dw,
                      SummaGrid& grid);

}  // namespace llmp
