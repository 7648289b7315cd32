// Lab summa, reference solution (for instructors; students start from ../starter.cc).
//
// SUMMA (van de Geijn & Watts 1997, §2; Optimus, Xu et al. 2021, §3.1, Algorithms 1 and 2).
// Forward: q steps, each a broadcast of X_ik along the row and of W_kj down the column, then a
// local product added into Y_ij. Backward: the transposed variants, each step a broadcast, a
// local product that is a partial block of another rank's result, and a reduce to that rank.
//
// Glossary: q grid side, (i, j) this rank, k the step, m × kb blocks of X, kb × n of W.
#include <string>
#include <vector>

#include "common/runtime/check.h"
#include "kernels/cpu/matmul.h"
#include "labs/summa/summa.h"

namespace llmp {

namespace {

Tensor block(int64_t rows, int64_t cols, MemCategory cat = MemCategory::kActivations) {
  return Tensor::empty({rows, cols}, DType::kF32, cat);
}

void add_into(Tensor& acc, const Tensor& t) {
  for (int64_t e = 0; e < acc.numel(); ++e) acc.f32()[e] += t.f32()[e];
}

void check_xw(const Tensor& x, const Tensor& w) {
  LLMP_CHECK(x.ndim() == 2 && w.ndim() == 2 && w.dim(0) == x.dim(1),
             "summa: want x (m, kb) and w (kb, n); got x " + x.describe() + ", w " + w.describe());
}

}  // namespace

Tensor summa_forward(const Tensor& x, const Tensor& w, SummaGrid& g) {
  check_xw(x, w);
  const int m = x.dim(0), kb = x.dim(1), n = w.dim(1);
  Tensor y = Tensor::zeros({m, n}, DType::kF32, MemCategory::kActivations);
  Tensor a = block(m, kb, MemCategory::kCommBuffers), b = block(kb, n, MemCategory::kCommBuffers);
  Tensor p = block(m, n, MemCategory::kCommBuffers);
  for (int k = 0; k < g.q; ++k) {
    if (g.j == k) a.copy_from(x);  // X_ik: mine when I am column k of my row
    g.row->broadcast(a, /*root=*/k);  // 4·m·kb bytes
    if (g.i == k) b.copy_from(w);  // W_kj: mine when I am row k of my column
    g.col->broadcast(b, /*root=*/k);  // 4·kb·n bytes
    cpu::matmul_forward(p.f32(), a.f32(), b.f32(), nullptr, m, kb, n);  // (m,kb)@(kb,n)
    add_into(y, p);                                                       // Y_ij += X_ik·W_kj
  }
  return y;
}

Tensor summa_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dw,
                      SummaGrid& g) {
  check_xw(x, w);
  const int m = x.dim(0), kb = x.dim(1), n = w.dim(1);
  LLMP_CHECK(dy.shape() == std::vector<int64_t>({m, n}) &&
                 dw.shape() == std::vector<int64_t>({kb, n}),
             "summa_backward: want dy (m, n) and dw (kb, n) for x " + x.describe() + ", w " +
                 w.describe() + "; got dy " + dy.describe() + ", dw " + dw.describe());
  Tensor dx = block(m, kb);
  Tensor wk = block(kb, n, MemCategory::kCommBuffers), xk = block(m, kb, MemCategory::kCommBuffers);
  Tensor px = block(m, kb, MemCategory::kCommBuffers);
  Tensor pw = Tensor::zeros({kb, n}, DType::kF32, MemCategory::kCommBuffers);
  for (int k = 0; k < g.q; ++k) {
    // dX_ik = Σ_j dY_ij·W_kjᵀ: W_kj down column j, partial (m,n)@(n,kb), summed along row i at j=k
    if (g.i == k) wk.copy_from(w);
    g.col->broadcast(wk, /*root=*/k);
    cpu::matmul_backward_input(px.f32(), dy.f32(), wk.f32(), m, kb, n);
    g.row->reduce(px, /*root=*/k);
    if (g.j == k) dx.copy_from(px);
    // dW_kj = Σ_i X_ikᵀ·dY_ij: X_ik along row i, partial (kb,m)@(m,n), summed down column j at i=k
    if (g.j == k) xk.copy_from(x);
    g.row->broadcast(xk, /*root=*/k);
    pw.fill(0.0f);
    cpu::matmul_backward_weight(pw.f32(), nullptr, dy.f32(), xk.f32(), m, kb, n);
    g.col->reduce(pw, /*root=*/k);
    if (g.i == k) add_into(dw, pw);
  }
  return dx;
}

}  // namespace llmp
