// out = x + y + b and db += Σ_rows dy (see residual.h).
#include "kernels/cuda/residual.h"

#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"

namespace llmp {
namespace cuda {
namespace {

// out, x, y in format F (dtype_io.h): the sum in fp32, rounded once into out.
template <Fmt F>
__global__ void residual_bias_add_kernel(void* out, const void* x, const void* y,
                                         const float* __restrict__ b, int64_t N, int C) {
  for (int64_t i = gs_begin(); i < N * C; i += gs_step())
    store_rounded<F>(out, i, load_f32<F>(x, i) + load_f32<F>(y, i) + b[i % C]);
}

// The term of db[c] += Σ_n dy[n, c] (column_sums.h), dy in format F.
template <Fmt F>
struct BiasGradTerm {
  const void* dy;
  int C;
  __device__ void operator()(int64_t n, int c, float* v) const {
    v[0] = load_f32<F>(dy, n * C + c);
  }
};

}  // namespace

void residual_bias_add(void* out, const void* x, const void* y, const float* b, long N, int C,
                       DType d) {
  const Fmt f = fmt_of(d, "cuda::residual_bias_add");
  const int64_t n = static_cast<int64_t>(N) * C;
  if (n <= 0) return;
  with_fmt(f, [&](auto t) {
    residual_bias_add_kernel<decltype(t)::value>
        <<<elementwise_blocks(n), kThreads, 0, stream()>>>(out, x, y, b, N, C);
  });
  LLMP_LAUNCH_CHECK();
}

void residual_bias_backward(float* db, const void* dy, long N, int C, DType dy_dtype) {
  const Fmt f = fmt_of(dy_dtype, "cuda::residual_bias_backward: dy");
  if (N <= 0 || C <= 0) return;
  with_fmt(f, [&](auto t) {
    column_sums<1>(ColumnOutputs<1>{{db}}, BiasGradTerm<decltype(t)::value>{dy, C}, N, C);
  });
}

}  // namespace cuda
}  // namespace llmp
