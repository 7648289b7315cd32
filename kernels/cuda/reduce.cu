// Two-pass reductions and the dtype conversions (see reduce.h).
#include "kernels/cuda/reduce.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"

namespace llmp {
namespace cuda {
namespace {

// Pass 1: partial[block] = Σ over the block's grid-stride share of f(x_i), in V; x of format F
// (widened exactly as it is read).
template <typename V, bool kSquares, Fmt F>
__global__ void partial_kernel(V* partial, const void* __restrict__ x, int64_t n) {
  V s = 0;
  for (int64_t i = gs_begin(); i < n; i += gs_step()) {
    const float xi = load_f32<F>(x, i);
    if constexpr (kSquares) s += static_cast<V>(xi) * static_cast<V>(xi);
    else s += isfinite(xi) ? 0 : 1;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Pass 2 (one block): out = Σ partial[0..k).
template <typename V>
__global__ void total_kernel(V* out, const V* __restrict__ partial, int k) {
  V s = 0;
  for (int i = threadIdx.x; i < k; i += blockDim.x) s += partial[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

template <typename V, bool kSquares, Fmt F = Fmt::kF32>
V reduce(const void* x, int64_t n) {
  if (n <= 0) return 0;
  const int k = reduce_blocks(n);
  V* ws = static_cast<V*>(workspace(sizeof(V) * (k + 1)));  // k partials, then the total
  partial_kernel<V, kSquares, F><<<k, kThreads, 0, stream()>>>(ws, x, n);
  LLMP_LAUNCH_CHECK();
  total_kernel<V><<<1, kThreads, 0, stream()>>>(ws + k, ws, k);
  LLMP_LAUNCH_CHECK();
  V total = 0;
  CUDA_CHECK(cudaMemcpyAsync(&total, ws + k, sizeof(V), cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  return total;
}

template <Fmt F>
__global__ void widen_kernel(float* dst, const void* src, int64_t n) {
  for (int64_t i = gs_begin(); i < n; i += gs_step()) dst[i] = load_f32<F>(src, i);
}

template <Fmt F>
__global__ void round_kernel(void* dst, const float* src, int64_t n) {
  for (int64_t i = gs_begin(); i < n; i += gs_step()) store_rounded<F>(dst, i, src[i]);
}

// dst = round(widen(dst) + src): one rounding per element, as kernels/cpu accumulate_to.
template <Fmt F>
__global__ void accumulate_kernel(void* dst, const float* src, int64_t n) {
  for (int64_t i = gs_begin(); i < n; i += gs_step())
    store_rounded<F>(dst, i, load_f32<F>(dst, i) + src[i]);
}

}  // namespace

double sum_of_squares(const void* x, DType dtype, int64_t n) {
  const Fmt f = fmt_of(dtype, "cuda::sum_of_squares");
  if (f == Fmt::kF16) return reduce<double, true, Fmt::kF16>(x, n);
  if (f == Fmt::kBF16) return reduce<double, true, Fmt::kBF16>(x, n);
  return reduce<double, true, Fmt::kF32>(x, n);
}

int64_t count_nonfinite(const float* x, int64_t n) {
  return static_cast<int64_t>(reduce<unsigned long long, false>(x, n));
}

void widen(const void* src, DType src_dtype, float* dst, int64_t n) {
  const Fmt f = fmt_of(src_dtype, "cuda::widen");
  if (n <= 0) return;
  const int blocks = elementwise_blocks(n);
  if (f == Fmt::kF32) widen_kernel<Fmt::kF32><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  if (f == Fmt::kF16) widen_kernel<Fmt::kF16><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  if (f == Fmt::kBF16) widen_kernel<Fmt::kBF16><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  LLMP_LAUNCH_CHECK();
}

void round_to(const float* src, void* dst, DType dst_dtype, int64_t n) {
  const Fmt f = fmt_of(dst_dtype, "cuda::round_to");
  if (n <= 0) return;
  const int blocks = elementwise_blocks(n);
  if (f == Fmt::kF32) round_kernel<Fmt::kF32><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  if (f == Fmt::kF16) round_kernel<Fmt::kF16><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  if (f == Fmt::kBF16) round_kernel<Fmt::kBF16><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  LLMP_LAUNCH_CHECK();
}

void accumulate_to(const float* src, void* dst, DType dst_dtype, int64_t n) {
  const Fmt f = fmt_of(dst_dtype, "cuda::accumulate_to");
  if (n <= 0) return;
  const int blocks = elementwise_blocks(n);
  if (f == Fmt::kF32) accumulate_kernel<Fmt::kF32><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  if (f == Fmt::kF16) accumulate_kernel<Fmt::kF16><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  if (f == Fmt::kBF16)
    accumulate_kernel<Fmt::kBF16><<<blocks, kThreads, 0, stream()>>>(dst, src, n);
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
