// AdamW on the GPU: one grid-stride launch per run of equal weight decay (see adamw.h).
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

struct Hyper {  // one step's constants
  float lr, b1, b2, c1, c2, eps, wd;
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
    const float g = load_f32<G>(g16, i) * grad_scale;
    adamw_element(master[i], g, m[i], v[i], h.lr, h.b1, h.b2, h.c1, h.c2, h.eps, h.wd);
    store_rounded<P>(p16, i, master[i]);
  }
}

Hyper hyper(const AdamWConfig& cfg, int64_t t, bool decayed) {
  return {cfg.lr,
          cfg.beta1,
          cfg.beta2,
          adamw_bias_correction(cfg.beta1, t),
          adamw_bias_correction(cfg.beta2, t),
          cfg.eps,
          decayed ? cfg.weight_decay : 0.0f};
}

template <Fmt P, Fmt G>
void launch_mixed(void* p16, const void* g16, float grad_scale, float* master, float* m, float* v,
                  int64_t o, int64_t n, const Hyper& h) {
  const int64_t es = P == Fmt::kF32 ? 4 : 2, gs = G == Fmt::kF32 ? 4 : 2;  // element bytes
  adamw_mixed_kernel<P, G><<<elementwise_blocks(n), kThreads, 0, stream()>>>(
      static_cast<char*>(p16) + o * es, static_cast<const char*>(g16) + o * gs, grad_scale,
      master + o, m + o, v + o, n, h);
}

template <Fmt P>
void dispatch_grads(Fmt g, void* p16, const void* g16, float grad_scale, float* master, float* m,
                    float* v, int64_t o, int64_t n, const Hyper& h) {
  if (g == Fmt::kF32) launch_mixed<P, Fmt::kF32>(p16, g16, grad_scale, master, m, v, o, n, h);
  if (g == Fmt::kF16) launch_mixed<P, Fmt::kF16>(p16, g16, grad_scale, master, m, v, o, n, h);
  if (g == Fmt::kBF16) launch_mixed<P, Fmt::kBF16>(p16, g16, grad_scale, master, m, v, o, n, h);
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, int64_t i0, int64_t count,
                  int64_t t, const AdamWConfig& cfg, const std::vector<ElementRange>& decay) {
  for (const AdamWSegment& s : adamw_segments(decay, i0, count)) {
    const int64_t o = s.begin - i0, n = s.end - s.begin;
    adamw_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(
        params + o, grads + o, m + o, v + o, n, hyper(cfg, t, s.decayed));
    LLMP_LAUNCH_CHECK();
  }
}

void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16, DType grad_dtype,
                        float grad_scale, float* master, float* m, float* v, int64_t i0,
                        int64_t count, int64_t t, const AdamWConfig& cfg,
                        const std::vector<ElementRange>& decay) {
  const Fmt p = fmt_of(param_dtype, "cuda::adamw_update_mixed parameters");
  const Fmt g = fmt_of(grad_dtype, "cuda::adamw_update_mixed gradients");
  for (const AdamWSegment& s : adamw_segments(decay, i0, count)) {
    const int64_t o = s.begin - i0, n = s.end - s.begin;
    const Hyper h = hyper(cfg, t, s.decayed);
    if (p == Fmt::kF32)
      dispatch_grads<Fmt::kF32>(g, params16, grads16, grad_scale, master, m, v, o, n, h);
    if (p == Fmt::kF16)
      dispatch_grads<Fmt::kF16>(g, params16, grads16, grad_scale, master, m, v, o, n, h);
    if (p == Fmt::kBF16)
      dispatch_grads<Fmt::kBF16>(g, params16, grads16, grad_scale, master, m, v, o, n, h);
    LLMP_LAUNCH_CHECK();
  }
}

}  // namespace cuda
}  // namespace llmp
