// Lab summa: your implementation. Read README.md first, then summa.h (the full spec) and
// summa_grid.h (the grid and its groups, given); run the tests with
//     bazel test //labs/summa:student_test
// They fail until summa_forward() and summa_backward() below are done. Add helpers here (or in new
// files, listed in BUILD's `starter` target) as you like; the tests only call these two.
//
// What you may use: grid.row and grid.col (ProcessGroup::broadcast and ProcessGroup::reduce, with
// roots given as ranks IN THAT GROUP: in grid.row rank k is grid column k, in grid.col it is grid
// row k), kernels/cpu/matmul.h (matmul_forward: y = x @ W, OVERWRITES y; matmul_backward_input:
// dx = dy @ Wᵀ, OVERWRITES dx; matmul_backward_weight: dW += xᵀ @ dy, ACCUMULATES), Tensor::empty /
// zeros / copy_from / fill. What you may not: any other communication (the tests count the calls
// and bytes on each group), the world group, or MPI directly.
//
// Glossary: q = grid.q, (i, j) = (grid.i, grid.j), k the SUMMA step, X_ij (m, kb), W_ij (kb, n),
// Y_ij and dY_ij (m, n).
#include "common/runtime/check.h"
#include "kernels/cpu/matmul.h"
#include "labs/summa/summa.h"

namespace llmp {

// TODO(lab summa): part 1, the forward (spec: summa.h). Y_ij = Σ_k X_ik · W_kj, in q steps:
//   for k = 0 .. q-1:
//     - a (m, kb): on the rank whose grid column j == k, a copy of x; broadcast it on grid.row
//       from root k: now every rank of row i holds X_ik;
//     - b (kb, n): on the rank whose grid row i == k, a copy of w; broadcast it on grid.col from
//       root k: every rank of column j holds W_kj;
//     - Y_ij += a · b   (m, kb) @ (kb, n) -> (m, n), a local product.
// Return Y_ij, allocated with MemCategory::kActivations. Every rank makes the same 2q broadcasts
// in the same order, roots included (a rank that skips one hangs the others).
Tensor summa_forward(const Tensor& x, const Tensor& w, SummaGrid& grid) {
  (void)grid;  // TODO(lab summa): remove, implement above.
  // Until then: zeros, which is not X·W on any grid.
  return Tensor::zeros({x.dim(0), w.dim(1)}, DType::kF32, MemCategory::kActivations);
}

// TODO(lab summa): part 2, the backward (spec: summa.h). Given dy = dY_ij (m, n), return dX_ij
// (m, kb) and ACCUMULATE (+=) dW_ij into dw (kb, n). For k = 0 .. q-1:
//   dX (dY·Wᵀ): broadcast W_kj on grid.col from root k (the rank with i == k sends its w);
//     p = dy · W_kjᵀ (m, kb): a partial block of dX_ik; reduce (sum) p on grid.row to root k;
//     the rank with j == k now holds dX_ij (= dX_ik, its own block): keep it.
//   dW (Xᵀ·dY): broadcast X_ik on grid.row from root k (the rank with j == k sends its x);
//     p = X_ikᵀ · dy (kb, n): a partial block of dW_kj; reduce (sum) p on grid.col to root k;
//     the rank with i == k adds the sum into dw.
// Zero a partial before matmul_backward_weight accumulates into it.
Tensor summa_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dw,
                      SummaGrid& grid) {
  (void)dy, (void)w, (void)dw, (void)grid;  // TODO(lab summa): remove, implement above.
  // Until then: dX = 0 and no gradient accumulated.
  return Tensor::zeros(x.shape(), DType::kF32, MemCategory::kActivations);
}

}  // namespace llmp
