// AdamW on the GPU: one grid-stride launch per call (see adamw.h).
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

struct Hyper {  // one call's constants
  float lr, b1, b2, eps, wd, c1, c2;
};

__global__ void adamw_kernel(float* p, const float* __restrict__ g, float* m, float* v, int64_t n,
                             Hyper h) {
  for (int64_t i = gs_begin(); i < n; i += gs_step())
    adamw_element(p[i], g[i], m[i], v[i], h.lr, h.b1, h.b2, h.c1, h.c2, h.eps, h.wd);
}

template <Fmt P, Fmt G>
__global__ void adamw_mixed_kernel(void* p16, const void* g16, float grad_scale, float* master,
                                   float* m, float* v, int64_t n, Hyper h) {
  for (int64_t i = gs_begin(); i < n; i += gs_step()) {
    const float g = load_f32<G>(g16, i) * grad_scale;  // widen (exact), unscale by 1/S
    adamw_element(master[i], g, m[i], v[i], h.lr, h.b1, h.b2, h.c1, h.c2, h.eps, h.wd);
    store_rounded<P>(p16, i, master[i]);  // p16 = round(master), to nearest even
  }
}

template <Fmt P, Fmt G>
void launch_mixed(void* p16, const void* g16, float grad_scale, float* master, float* m, float* v,
                  int64_t n, const Hyper& h) {
  adamw_mixed_kernel<P, G><<<elementwise_blocks(n), kThreads, 0, stream()>>>(
      p16, g16, grad_scale, master, m, v, n, h);
}

template <Fmt P>
void dispatch_grads(Fmt g, void* p16, const void* g16, float grad_scale, float* master, float* m,
                    float* v, int64_t n, const Hyper& h) {
  if (g == Fmt::kF32) launch_mixed<P, Fmt::kF32>(p16, g16, grad_scale, master, m, v, n, h);
  if (g == Fmt::kF16) launch_mixed<P, Fmt::kF16>(p16, g16, grad_scale, master, m, v, n, h);
  if (g == Fmt::kBF16) launch_mixed<P, Fmt::kBF16>(p16, g16, grad_scale, master, m, v, n, h);
}

}  // namespace

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float c1, float c2) {
  if (n <= 0) return;  // a 0-block launch is an error
  adamw_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(
      p, g, m, v, n, Hyper{lr, beta1, beta2, eps, weight_decay, c1, c2});
  LLMP_LAUNCH_CHECK();
}

void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16, DType grad_dtype,
                        float grad_scale, float* master, float* m, float* v, int64_t n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, float c1,
                        float c2) {
  const Fmt p = fmt_of(param_dtype, "cuda::adamw_update_mixed parameters");
  const Fmt g = fmt_of(grad_dtype, "cuda::adamw_update_mixed gradients");
  if (n <= 0) return;
  const Hyper h{lr, beta1, beta2, eps, weight_decay, c1, c2};
  if (p == Fmt::kF32) dispatch_grads<Fmt::kF32>(g, params16, grads16, grad_scale, master, m, v, n, h);
  if (p == Fmt::kF16) dispatch_grads<Fmt::kF16>(g, params16, grads16, grad_scale, master, m, v, n, h);
  if (p == Fmt::kBF16)
    dispatch_grads<Fmt::kBF16>(g, params16, grads16, grad_scale, master, m, v, n, h);
  LLMP_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace llmp
