// SUMMA's three products (see summa.h).
#include "common/tp2d/summa.h"

#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

Tensor buffer(int64_t n, Device d) {
  return Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers, d);
}

// n floats from src to dst, both memory of `d` (a memmove on the CPU, a device copy on a GPU).
void copy(float* dst, const float* src, int64_t n, Device d) {
  allocator_for(d).copy(dst, d, src, d, n * int64_t(sizeof(float)));
}

}  // namespace

void summa_ab(ProcessGroup& row, ProcessGroup& col, float* Y, const float* X, const float* W,
              int64_t N, int Kl, int Ml, Device device) {
  const int q = row.size(), i = col.rank(), j = row.rank();
  KernelOps& ops = kernel_ops(device);
  Tensor xk = buffer(N * Kl, device), wk = buffer(int64_t(Kl) * Ml, device),
         t = buffer(N * Ml, device);
  allocator_for(device).set_zero(Y, int64_t(sizeof(float)) * N * Ml);
  for (int k = 0; k < q; ++k) {
    if (j == k) copy(xk.f32(), X, N * Kl, device);
    row.broadcast(xk, k);  // X_ik along row i: 4·N·Kl
    if (i == k) copy(wk.f32(), W, int64_t(Kl) * Ml, device);
    col.broadcast(wk, k);  // W_kj down column j: 4·Kl·Ml
    ops.matmul_forward(t.f32(), xk.f32(), wk.f32(), nullptr, N, Kl, Ml);  // (N,Kl)@(Kl,Ml)
    ops.add_to(Y, t.f32(), N * Ml);                                       // Y_ij += X_ik·W_kj
  }
}

void summa_abt(ProcessGroup& row, ProcessGroup& col, float* C, const float* A, const float* B,
               int64_t N, int Ml, int Kl, Device device) {
  const int q = row.size(), i = col.rank(), j = row.rank();
  KernelOps& ops = kernel_ops(device);
  Tensor bl = buffer(int64_t(Kl) * Ml, device), t = buffer(N * Kl, device);
  for (int l = 0; l < q; ++l) {
    if (i == l) copy(bl.f32(), B, int64_t(Kl) * Ml, device);
    col.broadcast(bl, l);  // B_lj down column j: 4·Kl·Ml
    ops.matmul_nt_forward(t.f32(), A, bl.f32(), N, Ml, Kl);  // (N,Ml)@(Ml,Kl)
    row.reduce(t, l);      // Σ_j to (i,l): 4·N·Kl
    if (j == l) copy(C, t.f32(), N * Kl, device);
  }
}

void summa_atb(ProcessGroup& row, ProcessGroup& col, float* C, const float* A, const float* B,
               int64_t N, int Kl, int Ml, Device device) {
  const int q = row.size(), i = col.rank(), j = row.rank();
  KernelOps& ops = kernel_ops(device);
  Tensor al = buffer(N * Kl, device), t = buffer(int64_t(Kl) * Ml, device);
  for (int l = 0; l < q; ++l) {
    if (j == l) copy(al.f32(), A, N * Kl, device);
    row.broadcast(al, l);  // A_il along row i: 4·N·Kl
    t.fill(0.0f);
    ops.matmul_backward_weight(t.f32(), nullptr, B, al.f32(), N, Kl, Ml);  // (Kl,N)@(N,Ml)
    col.reduce(t, l);      // Σ_i to (l,j): 4·Kl·Ml
    if (i == l) ops.add_to(C, t.f32(), int64_t(Kl) * Ml);
  }
}

}  // namespace llmp
