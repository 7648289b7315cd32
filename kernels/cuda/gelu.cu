// GELU forward/backward: one grid-stride loop each over shared_math.h's formulas (see gelu.h).
#include "kernels/cuda/gelu.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

__global__ void gelu_forward_kernel(float* y, const float* x, int64_t N) {
  for (int64_t i = gs_begin(); i < N; i += gs_step()) y[i] = gelu(x[i]);
}

__global__ void gelu_backward_kernel(float* dx, const float* x, const float* dy, int64_t N) {
  for (int64_t i = gs_begin(); i < N; i += gs_step()) dx[i] = gelu_grad(x[i]) * dy[i];
}

}  // namespace

void gelu_forward(float* y, const float* x, long N) {
  if (N <= 0) return;
  gelu_forward_kernel<<<elementwise_blocks(N), kThreads, 0, stream()>>>(y, x, N);
  LLMP_LAUNCH_CHECK();
}

void gelu_backward(float* dx, const float* x, const float* dy, long N) {
  if (N <= 0) return;
  gelu_backward_kernel<<<elementwise_blocks(N), kThreads, 0, stream()>>>(dx, x, dy, N);
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
