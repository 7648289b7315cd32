// SUMMA's three products (see summa.h).
#include "common/tp2d/summa.h"

#include <cstring>

#include "kernels/cpu/matmul.h"

namespace llmp {
namespace {

Tensor buffer(int64_t n) { return Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers); }

}  // namespace

void summa_ab(ProcessGroup& row, ProcessGroup& col, float* Y, const float* X, const float* W,
              int64_t N, int Kl, int Ml) {
  const int q = row.size(), i = col.rank(), j = row.rank();
  Tensor xk = buffer(N * Kl), wk = buffer(int64_t(Kl) * Ml), t = buffer(N * Ml);
  std::memset(Y, 0, sizeof(float) * N * Ml);
  for (int k = 0; k < q; ++k) {
    if (j == k) std::memcpy(xk.f32(), X, sizeof(float) * N * Kl);
    row.broadcast(xk, k);  // X_ik along row i: 4·N·Kl
    if (i == k) std::memcpy(wk.f32(), W, sizeof(float) * Kl * Ml);
    col.broadcast(wk, k);  // W_kj down column j: 4·Kl·Ml
    cpu::matmul_forward(t.f32(), xk.f32(), wk.f32(), nullptr, N, Kl, Ml);  // (N,Kl)@(Kl,Ml)
    for (int64_t e = 0; e < N * Ml; ++e) Y[e] += t.f32()[e];
  }
}

void summa_abt(ProcessGroup& row, ProcessGroup& col, float* C, const float* A, const float* B,
               int64_t N, int Ml, int Kl) {
  const int q = row.size(), i = col.rank(), j = row.rank();
  Tensor bl = buffer(int64_t(Kl) * Ml), t = buffer(N * Kl);
  for (int l = 0; l < q; ++l) {
    if (i == l) std::memcpy(bl.f32(), B, sizeof(float) * Kl * Ml);
    col.broadcast(bl, l);  // B_lj down column j: 4·Kl·Ml
    cpu::matmul_nt_forward(t.f32(), A, bl.f32(), N, Ml, Kl);  // (N,Ml)@(Ml,Kl)
    row.reduce(t, l);      // Σ_j to (i,l): 4·N·Kl
    if (j == l) std::memcpy(C, t.f32(), sizeof(float) * N * Kl);
  }
}

void summa_atb(ProcessGroup& row, ProcessGroup& col, float* C, const float* A, const float* B,
               int64_t N, int Kl, int Ml) {
  const int q = row.size(), i = col.rank(), j = row.rank();
  Tensor al = buffer(N * Kl), t = buffer(int64_t(Kl) * Ml);
  for (int l = 0; l < q; ++l) {
    if (j == l) std::memcpy(al.f32(), A, sizeof(float) * N * Kl);
    row.broadcast(al, l);  // A_il along row i: 4·N·Kl
    t.fill(0.0f);
    cpu::matmul_backward_weight(t.f32(), nullptr, B, al.f32(), N, Kl, Ml);  // (Kl,N)@(N,Ml)
    col.reduce(t, l);      // Σ_i to (l,j): 4·Kl·Ml
    if (i == l)
      for (int64_t e = 0; e < int64_t(Kl) * Ml; ++e) C[e] += t.f32()[e];
  }
}

}  // namespace llmp
