// out = x + y + b and db += Σ_rows dy (see residual.h).
#include "kernels/cuda/residual.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"

namespace llmp {
namespace cuda {
namespace {

__global__ void residual_bias_add_kernel(float* out, const float* x, const float* y,
                                         const float* __restrict__ b, int64_t N, int C) {
  for (int64_t i = gs_begin(); i < N * C; i += gs_step()) out[i] = x[i] + y[i] + b[i % C];
}

// Thread c: db[c] += Σ_n dy[n, c], rows in order.
__global__ void column_sum_kernel(float* __restrict__ db, const float* __restrict__ dy, int64_t N,
                                  int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s = 0.0f;
  for (int64_t n = 0; n < N; ++n) s += dy[n * C + c];
  db[c] += s;
}

}  // namespace

void residual_bias_add(float* out, const float* x, const float* y, const float* b, long N, int C) {
  const int64_t n = static_cast<int64_t>(N) * C;
  if (n <= 0) return;
  residual_bias_add_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(out, x, y, b, N, C);
  LLMP_LAUNCH_CHECK();
}

void residual_bias_backward(float* db, const float* dy, long N, int C) {
  if (N <= 0 || C <= 0) return;
  column_sum_kernel<<<column_blocks(C), kThreads, 0, stream()>>>(db, dy, N, C);
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
