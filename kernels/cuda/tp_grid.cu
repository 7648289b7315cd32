// The 2D / 2.5D tensor-parallel walk's kernels (see tp_grid.h).
#include "kernels/cuda/tp_grid.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

__global__ void add_to_kernel(float* y, const float* __restrict__ x, int64_t n) {
  for (int64_t i = gs_begin(); i < n; i += gs_step()) y[i] += x[i];
}

__global__ void bias_add_kernel(float* y, const float* __restrict__ b, int64_t N, int C) {
  for (int64_t i = gs_begin(); i < N * C; i += gs_step()) y[i] += b[i % C];
}

// Warp n: s[n] = Σ_c x[n,c].
__global__ void partial_sum_kernel(float* s, const float* __restrict__ x, int64_t N, int Cl) {
  const int64_t n = warp_row(blockIdx.x, threadIdx.x);
  if (n >= N) return;  // a whole warp leaves: the shuffles below see all 32 lanes
  const int lane = threadIdx.x % kWarp;
  float a = 0.0f;
  for (int c = lane; c < Cl; c += kWarp) a += x[n * Cl + c];
  a = warp_sum(a);
  if (lane == 0) s[n] = a;
}

// Warp n: mean[n] = s[n]/C, s[n] = Σ_c (x[n,c] - mean[n])².
__global__ void partial_sq_kernel(float* mean, float* s, const float* __restrict__ x, int64_t N,
                                  int Cl, int C) {
  const int64_t n = warp_row(blockIdx.x, threadIdx.x);
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float m = ln_mean(s[n], C);
  float a = 0.0f;
  for (int c = lane; c < Cl; c += kWarp) a += (x[n * Cl + c] - m) * (x[n * Cl + c] - m);
  a = warp_sum(a);
  __syncwarp();  // every lane has read s[n] before lane 0 overwrites it
  if (lane == 0) mean[n] = m, s[n] = a;
}

__global__ void normalize_kernel(float* __restrict__ y, float* mean_out, float* rstd_out,
                                 const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, const float* mean, const float* s,
                                 int64_t N, int Cl, int C) {
  const int64_t n = warp_row(blockIdx.x, threadIdx.x);
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float m = mean[n], r = ln_rstd(s[n], C);
  for (int c = lane; c < Cl; c += kWarp)
    y[n * Cl + c] = ln_normalize(x[n * Cl + c], m, r, w[c], b[c]);
  __syncwarp();  // mean_out may alias mean
  if (lane == 0) {
    if (mean_out) mean_out[n] = m;
    if (rstd_out) rstd_out[n] = r;
  }
}

__global__ void backward_partial_kernel(float* s, const float* __restrict__ dy,
                                        const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ mean,
                                        const float* __restrict__ rstd, int64_t N, int Cl) {
  const int64_t n = warp_row(blockIdx.x, threadIdx.x);
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float m = mean[n], r = rstd[n];
  float sd = 0.0f, sdx = 0.0f;  // Σ dx̂, Σ dx̂·x̂
  for (int c = lane; c < Cl; c += kWarp) {
    const float dxhat = dy[n * Cl + c] * w[c], xhat = (x[n * Cl + c] - m) * r;
    sd += dxhat;
    sdx += dxhat * xhat;
  }
  sd = warp_sum(sd), sdx = warp_sum(sdx);
  if (lane == 0) s[n] = sd, s[N + n] = sdx;
}

__global__ void backward_apply_kernel(float* dx, const float* __restrict__ s,
                                      const float* __restrict__ dy, const float* __restrict__ x,
                                      const float* __restrict__ w, const float* __restrict__ mean,
                                      const float* __restrict__ rstd, int64_t N, int Cl, int C) {
  const int64_t n = warp_row(blockIdx.x, threadIdx.x);
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float m = mean[n], r = rstd[n], mean_d = s[n] / C, mean_dx = s[N + n] / C;
  for (int c = lane; c < Cl; c += kWarp)
    dx[n * Cl + c] += ln_dx(dy[n * Cl + c] * w[c], (x[n * Cl + c] - m) * r, mean_d, mean_dx, r);
}

}  // namespace

void add_to(float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  add_to_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(y, x, n);
  LLMP_LAUNCH_CHECK();
}

void bias_add(float* y, const float* b, long N, int C) {
  const int64_t n = static_cast<int64_t>(N) * C;
  if (n <= 0) return;
  bias_add_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(y, b, N, C);
  LLMP_LAUNCH_CHECK();
}

void layernorm_partial_sum(float* s, const float* x, long N, int Cl) {
  if (N <= 0) return;
  partial_sum_kernel<<<warp_per_row_blocks(N), kThreads, 0, stream()>>>(s, x, N, Cl);
  LLMP_LAUNCH_CHECK();
}

void layernorm_partial_sq(float* mean, float* s, const float* x, long N, int Cl, int C) {
  if (N <= 0) return;
  partial_sq_kernel<<<warp_per_row_blocks(N), kThreads, 0, stream()>>>(mean, s, x, N, Cl, C);
  LLMP_LAUNCH_CHECK();
}

void layernorm_normalize(float* y, float* mean_out, float* rstd_out, const float* x,
                         const float* w, const float* b, const float* mean, const float* s,
                         long N, int Cl, int C) {
  if (N <= 0) return;
  normalize_kernel<<<warp_per_row_blocks(N), kThreads, 0, stream()>>>(y, mean_out, rstd_out, x, w,
                                                                      b, mean, s, N, Cl, C);
  LLMP_LAUNCH_CHECK();
}

void layernorm_backward_partial(float* s, const float* dy, const float* x, const float* w,
                                const float* mean, const float* rstd, long N, int Cl) {
  if (N <= 0) return;
  backward_partial_kernel<<<warp_per_row_blocks(N), kThreads, 0, stream()>>>(s, dy, x, w, mean,
                                                                             rstd, N, Cl);
  LLMP_LAUNCH_CHECK();
}

void layernorm_backward_apply(float* dx, const float* s, const float* dy, const float* x,
                              const float* w, const float* mean, const float* rstd, long N,
                              int Cl, int C) {
  if (N <= 0) return;
  backward_apply_kernel<<<warp_per_row_blocks(N), kThreads, 0, stream()>>>(dx, s, dy, x, w, mean,
                                                                           rstd, N, Cl, C);
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
