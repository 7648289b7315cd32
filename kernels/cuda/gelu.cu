// GELU forward/backward: one grid-stride loop each over shared_math.h's formulas (see gelu.h).
#include "kernels/cuda/gelu.h"

#include <stdexcept>
#include <string>

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

// x in format F; dy fp32 (the product's output); dx in format FX (F32, or F: rounded once).
template <Fmt F, Fmt FX>
__global__ void gelu_backward_kernel(void* dx, const void* x, const float* dy, int64_t N) {
  for (int64_t i = gs_begin(); i < N; i += gs_step())
    store_rounded<FX>(dx, i, gelu_grad(load_f32<F>(x, i)) * dy[i]);
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

void gelu_backward(void* dx, const void* x, const float* dy, long N, DType x_dtype,
                   DType dx_dtype) {
  const Fmt f = fmt_of(x_dtype, "cuda::gelu_backward: x");
  const Fmt fx = fmt_of(dx_dtype, "cuda::gelu_backward: dx");
  if (fx != Fmt::kF32 && fx != f)
    throw std::invalid_argument(std::string("cuda::gelu_backward: dx is ") + to_string(dx_dtype) +
                                ", neither f32 nor x's " + to_string(x_dtype));
  if (N <= 0) return;
  with_fmt(f, [&](auto t) {
    constexpr Fmt F = decltype(t)::value;
    if (fx == Fmt::kF32)
      gelu_backward_kernel<F, Fmt::kF32>
          <<<elementwise_blocks(N), kThreads, 0, stream()>>>(dx, x, dy, N);
    else
      gelu_backward_kernel<F, F><<<elementwise_blocks(N), kThreads, 0, stream()>>>(dx, x, dy, N);
  });
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
