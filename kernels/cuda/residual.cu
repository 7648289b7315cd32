// out = x + y + b and db += Σ_rows dy (see residual.h).
#include "kernels/cuda/residual.h"

#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"

namespace llmp {
namespace cuda {
namespace {

__global__ void residual_bias_add_kernel(float* out, const float* x, const float* y,
                                         const float* __restrict__ b, int64_t N, int C) {
  for (int64_t i = gs_begin(); i < N * C; i += gs_step()) out[i] = x[i] + y[i] + b[i % C];
}

// The term of db[c] += Σ_n dy[n, c] (column_sums.h).
struct BiasGradTerm {
  const float* __restrict__ dy;
  int C;
  __device__ void operator()(int64_t n, int c, float* v) const { v[0] = dy[n * C + c]; }
};

}  // namespace

void residual_bias_add(float* out, const float* x, const float* y, const float* b, long N, int C) {
  const int64_t n = static_cast<int64_t>(N) * C;
  if (n <= 0) return;
  residual_bias_add_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(out, x, y, b, N, C);
  LLMP_LAUNCH_CHECK();
}

void residual_bias_backward(float* db, const float* dy, long N, int C) {
  if (N <= 0 || C <= 0) return;
  column_sums<1>(ColumnOutputs<1>{{db}}, BiasGradTerm{dy, C}, N, C);
}

}  // namespace cuda
}  // namespace llmp
