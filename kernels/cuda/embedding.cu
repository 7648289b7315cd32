// Embedding lookups and their atomicAdd scatter (see embedding.h).
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/embedding.h"

namespace llmp {
namespace cuda {
namespace {

__global__ void token_forward_kernel(float* __restrict__ out, const int32_t* __restrict__ tokens,
                                     const float* __restrict__ wte, int v0, int Vr, int64_t N,
                                     int C) {
  for (int64_t i = gs_begin(); i < N * C; i += gs_step()) {
    const int row = tokens[i / C] - v0;
    out[i] = (row >= 0 && row < Vr) ? wte[static_cast<int64_t>(row) * C + i % C] : 0.0f;
  }
}

__global__ void token_backward_kernel(float* dwte, const float* __restrict__ dout,
                                      const int32_t* __restrict__ tokens, int v0, int Vr, int64_t N,
                                      int C) {
  for (int64_t i = gs_begin(); i < N * C; i += gs_step()) {
    const int row = tokens[i / C] - v0;
    if (row >= 0 && row < Vr) atomicAdd(dwte + static_cast<int64_t>(row) * C + i % C, dout[i]);
  }
}

// Position of element i of x (B,Tl,C): t = (i / C) % Tl; the wpe row is t0 + t, or positions[t]
// when positions is given.
__device__ __forceinline__ int64_t wpe_index(int64_t i, int Tl, int t0, const int* positions,
                                             int C) {
  const int t = static_cast<int>((i / C) % Tl);
  const int p = positions ? positions[t] : t0 + t;
  return static_cast<int64_t>(p) * C + i % C;
}

__global__ void position_forward_kernel(float* __restrict__ x, const float* __restrict__ wpe,
                                        int64_t n, int Tl, int t0, const int* positions, int C) {
  for (int64_t i = gs_begin(); i < n; i += gs_step())
    x[i] += wpe[wpe_index(i, Tl, t0, positions, C)];
}

__global__ void position_backward_kernel(float* dwpe, const float* __restrict__ dx, int64_t n,
                                         int Tl, int t0, const int* positions, int C) {
  for (int64_t i = gs_begin(); i < n; i += gs_step())
    atomicAdd(dwpe + wpe_index(i, Tl, t0, positions, C), dx[i]);
}

void position(bool backward, float* dst, const float* src, int B, int Tl, int t0,
              const int* positions, int C) {
  const int64_t n = static_cast<int64_t>(B) * Tl * C;
  if (n <= 0) return;
  if (backward)
    position_backward_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(dst, src, n, Tl, t0,
                                                                               positions, C);
  else
    position_forward_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(dst, src, n, Tl, t0,
                                                                              positions, C);
  LLMP_LAUNCH_CHECK();
}

}  // namespace

void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int v0, int Vr,
                             int N, int C) {
  const int64_t n = static_cast<int64_t>(N) * C;
  if (n <= 0) return;
  token_forward_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(out, tokens, wte, v0, Vr,
                                                                         N, C);
  LLMP_LAUNCH_CHECK();
}

void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int v0, int Vr,
                              int N, int C) {
  const int64_t n = static_cast<int64_t>(N) * C;
  if (n <= 0) return;
  token_backward_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(dwte, dout, tokens, v0,
                                                                          Vr, N, C);
  LLMP_LAUNCH_CHECK();
}

void position_embedding_forward(float* x, const float* wpe, int B, int Tl, int t0, int C) {
  position(false, x, wpe, B, Tl, t0, nullptr, C);
}

void position_embedding_backward(float* dwpe, const float* dx, int B, int Tl, int t0, int C) {
  position(true, dwpe, dx, B, Tl, t0, nullptr, C);
}

void position_embedding_forward_at(float* x, const float* wpe, int B, int Tl, const int* positions,
                                   int C) {
  position(false, x, wpe, B, Tl, 0, positions, C);
}

void position_embedding_backward_at(float* dwpe, const float* dx, int B, int Tl,
                                    const int* positions, int C) {
  position(true, dwpe, dx, B, Tl, 0, positions, C);
}

}  // namespace cuda
}  // namespace llmp
