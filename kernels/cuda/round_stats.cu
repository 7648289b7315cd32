// The rounding statistics' two-pass count (see round_stats.h).
#include "kernels/cuda/round_stats.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"

namespace llmp {
namespace cuda {
namespace {

using Count = unsigned long long;
constexpr int kCounters = 4;  // nonzero, underflow, overflow, nonfinite

// h = round(x) in F, widened back to fp32 (f32: x).
template <Fmt F>
__device__ __forceinline__ float round_trip(float x) {
  if constexpr (F == Fmt::kF16) return f32_from_f16(f16_from_f32(x));
  if constexpr (F == Fmt::kBF16) return f32_from_bf16(bf16_from_f32(x));
  return x;
}

// Pass 1: partial[c·k + block] = the block's count c over its grid-stride share.
template <Fmt F, bool kAccumulate>
__global__ void count_kernel(Count* partial, const float* __restrict__ src, const void* dst,
                             int64_t n) {
  Count nonzero = 0, underflow = 0, overflow = 0, nonfinite = 0;
  for (int64_t i = gs_begin(); i < n; i += gs_step()) {
    const float x = kAccumulate ? load_f32<F>(dst, i) + src[i] : src[i];
    const float h = round_trip<F>(x);
    nonzero += x != 0.0f;
    underflow += x != 0.0f && h == 0.0f;
    overflow += isfinite(x) && isinf(h);
    nonfinite += !isfinite(h);
  }
  const Count c[kCounters] = {block_sum(nonzero), block_sum(underflow), block_sum(overflow),
                              block_sum(nonfinite)};
  if (threadIdx.x == 0)
    for (int j = 0; j < kCounters; ++j) partial[j * gridDim.x + blockIdx.x] = c[j];
}

// Pass 2 (one block): out[c] = Σ partial[c·k .. c·k + k).
__global__ void totals_kernel(Count* out, const Count* __restrict__ partial, int k) {
  for (int j = 0; j < kCounters; ++j) {
    Count s = 0;
    for (int i = threadIdx.x; i < k; i += blockDim.x) s += partial[j * k + i];
    s = block_sum(s);
    if (threadIdx.x == 0) out[j] = s;
  }
}

template <Fmt F>
void launch_count(Count* ws, int k, const float* src, const void* dst, int64_t n,
                  bool accumulate) {
  if (accumulate) count_kernel<F, true><<<k, kThreads, 0, stream()>>>(ws, src, dst, n);
  else count_kernel<F, false><<<k, kThreads, 0, stream()>>>(ws, src, dst, n);
}

}  // namespace

cpu::RoundStats count_rounding(const float* src, const void* dst, DType dst_dtype, int64_t n,
                               bool accumulate) {
  const Fmt f = fmt_of(dst_dtype, "cuda::count_rounding");
  cpu::RoundStats st;
  if (n <= 0) return st;
  const int k = reduce_blocks(n);
  Count* ws = static_cast<Count*>(workspace(sizeof(Count) * kCounters * (k + 1)));
  if (f == Fmt::kF32) launch_count<Fmt::kF32>(ws, k, src, dst, n, accumulate);
  if (f == Fmt::kF16) launch_count<Fmt::kF16>(ws, k, src, dst, n, accumulate);
  if (f == Fmt::kBF16) launch_count<Fmt::kBF16>(ws, k, src, dst, n, accumulate);
  LLMP_LAUNCH_CHECK();
  Count* totals = ws + kCounters * k;
  totals_kernel<<<1, kThreads, 0, stream()>>>(totals, ws, k);
  LLMP_LAUNCH_CHECK();
  Count host[kCounters] = {0, 0, 0, 0};
  CUDA_CHECK(cudaMemcpyAsync(host, totals, sizeof host, cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  st.elements = n;
  st.nonzero = static_cast<int64_t>(host[0]);
  st.underflow = static_cast<int64_t>(host[1]);
  st.overflow = static_cast<int64_t>(host[2]);
  st.nonfinite = static_cast<int64_t>(host[3]);
  return st;
}

}  // namespace cuda
}  // namespace llmp
