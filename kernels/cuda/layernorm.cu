// LayerNorm forward/backward: a warp per row over shared_math.h's element steps (layernorm.h).
#include "kernels/cuda/layernorm.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

// x and y in format F (dtype_io.h): a 16-bit x is widened in registers, y rounded once.
template <Fmt F>
__global__ void layernorm_forward_kernel(void* y, float* mean, float* rstd, const void* x,
                                         const float* __restrict__ w,
                                         const float* __restrict__ b, int N, int C) {
  const int64_t n = warp_row(blockIdx.x, threadIdx.x);
  if (n >= N) return;  // a whole warp leaves: the shuffles below see all 32 lanes
  const int lane = threadIdx.x % kWarp;
  const int64_t row = n * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += kWarp) s += load_f32<F>(x, row + c);
  const float m = ln_mean(warp_sum(s), C);
  float sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float d = load_f32<F>(x, row + c) - m;
    sq += d * d;
  }
  const float r = ln_rstd(warp_sum(sq), C);
  for (int c = lane; c < C; c += kWarp)
    store_rounded<F>(y, row + c, ln_normalize(load_f32<F>(x, row + c), m, r, w[c], b[c]));
  if (lane == 0) {
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = r;
  }
}

// dy and x in format F (widened in registers); dx = dres + ∂L/∂x, both in format FX (F32 or F;
// dres may be dx: accumulated in place, each element read and written by one lane).
template <Fmt F, Fmt FX>
__global__ void layernorm_backward_kernel(void* dx, const void* dres, const void* dy,
                                          const void* x, const float* __restrict__ w,
                                          const float* __restrict__ mean,
                                          const float* __restrict__ rstd, int N, int C) {
  const int64_t n = warp_row(blockIdx.x, threadIdx.x);
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t row = n * C;
  const float m = mean[n], r = rstd[n];
  float sd = 0.0f, sdx = 0.0f;  // Σ dx̂, Σ dx̂·x̂
  for (int c = lane; c < C; c += kWarp) {
    const float dxhat = load_f32<F>(dy, row + c) * w[c];
    const float xhat = (load_f32<F>(x, row + c) - m) * r;
    sd += dxhat;
    sdx += dxhat * xhat;
  }
  const float mean_d = warp_sum(sd) / C, mean_dx = warp_sum(sdx) / C;
  for (int c = lane; c < C; c += kWarp)
    store_rounded<FX>(dx, row + c,
                      load_f32<FX>(dres, row + c) +
                          ln_dx(load_f32<F>(dy, row + c) * w[c], (load_f32<F>(x, row + c) - m) * r,
                                mean_d, mean_dx, r));
}

// The two terms of dw[c] += Σ_n dy[n,c]·x̂[n,c] and db[c] += Σ_n dy[n,c] (column_sums.h), dy and
// x in format F.
template <Fmt F>
struct LayerNormWeightTerms {
  const void* dy;
  const void* x;
  const float* __restrict__ mean;
  const float* __restrict__ rstd;
  int C;
  __device__ void operator()(int64_t n, int c, float* v) const {
    const float d = load_f32<F>(dy, n * C + c);
    v[0] = d * ((load_f32<F>(x, n * C + c) - mean[n]) * rstd[n]);
    v[1] = d;
  }
};

}  // namespace

void layernorm_forward(void* y, float* mean, float* rstd, const void* x, const float* w,
                       const float* b, int N, int C, DType d) {
  const Fmt f = fmt_of(d, "cuda::layernorm_forward");
  if (N <= 0) return;
  with_fmt(f, [&](auto t) {
    layernorm_forward_kernel<decltype(t)::value>
        <<<warp_per_row_blocks(N), kThreads, 0, stream()>>>(y, mean, rstd, x, w, b, N, C);
  });
  LLMP_LAUNCH_CHECK();
}

void layernorm_backward(void* dx, float* dw, float* db, const void* dy, const void* x,
                        const float* w, const float* mean, const float* rstd, int N, int C,
                        DType d, DType dx_dtype, const void* dres) {
  const Fmt f = fmt_of(d, "cuda::layernorm_backward");
  const Fmt fx = fmt_of(dx_dtype, "cuda::layernorm_backward: dx");
  if (fx != Fmt::kF32 && fx != f)
    throw std::invalid_argument(std::string("cuda::layernorm_backward: dx is ") +
                                to_string(dx_dtype) + ", neither f32 nor dy's and x's " +
                                to_string(d));
  if (N <= 0) return;
  if (!dres) dres = dx;  // accumulated in place
  with_fmt(f, [&](auto t) {
    constexpr Fmt F = decltype(t)::value;
    if (fx == Fmt::kF32)
      layernorm_backward_kernel<F, Fmt::kF32><<<warp_per_row_blocks(N), kThreads, 0, stream()>>>(
          dx, dres, dy, x, w, mean, rstd, N, C);
    else
      layernorm_backward_kernel<F, F><<<warp_per_row_blocks(N), kThreads, 0, stream()>>>(
          dx, dres, dy, x, w, mean, rstd, N, C);
  });
  LLMP_LAUNCH_CHECK();
  if (dw) layernorm_backward_weight(dw, db, dy, x, mean, rstd, N, C, d);
}

void layernorm_backward_weight(float* dw, float* db, const void* dy, const void* x,
                               const float* mean, const float* rstd, int N, int C, DType d) {
  const Fmt f = fmt_of(d, "cuda::layernorm_backward_weight");
  if (N <= 0 || C <= 0) return;
  with_fmt(f, [&](auto t) {
    column_sums<2>(ColumnOutputs<2>{{dw, db}},
                   LayerNormWeightTerms<decltype(t)::value>{dy, x, mean, rstd, C}, N, C);
  });
}

}  // namespace cuda
}  // namespace llmp
