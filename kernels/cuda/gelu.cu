// GELU forward/backward: one grid-stride loop each over shared_math.h's formulas (see gelu.h).
#include "kernels/cuda/gelu.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

// x and y in format F (dtype_io.h): a 16-bit x is widened in registers and y rounded once.
template <Fmt F>
__global__ void gelu_forward_kernel(void* y, const void* x, int64_t N) {
  for (int64_t i = gs_begin(); i < N; i += gs_step())
    store_rounded<F>(y, i, gelu(load_f32<F>(x, i)));
}

// x in format F; dx and dy fp32 (the product's output, rounded once after this, by the caller).
template <Fmt F>
__global__ void gelu_backward_kernel(float* dx, const void* x, const float* dy, int64_t N) {
  for (int64_t i = gs_begin(); i < N; i += gs_step()) dx[i] = gelu_grad(load_f32<F>(x, i)) * dy[i];
}

}  // namespace

void gelu_forward(void* y, const void* x, long N, DType d) {
  const Fmt f = fmt_of(d, "cuda::gelu_forward");
  if (N <= 0) return;
  with_fmt(f, [&](auto t) {
    gelu_forward_kernel<decltype(t)::value>
        <<<elementwise_blocks(N), kThreads, 0, stream()>>>(y, x, N);
  });
  LLMP_LAUNCH_CHECK();
}

void gelu_backward(float* dx, const void* x, const float* dy, long N, DType x_dtype) {
  const Fmt f = fmt_of(x_dtype, "cuda::gelu_backward: x");
  if (N <= 0) return;
  with_fmt(f, [&](auto t) {
    gelu_backward_kernel<decltype(t)::value>
        <<<elementwise_blocks(N), kThreads, 0, stream()>>>(dx, x, dy, N);
  });
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
