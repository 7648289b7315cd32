// AdamW on the GPU: one grid-stride launch per kMaxRunsPerLaunch runs (see adamw.h).
#include "kernels/cuda/adamw.h"

#include <algorithm>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

// One launch's runs, passed by value: run k covers [k ? end[k-1] : begin, end[k]) of the buffers.
struct Runs {
  int64_t begin = 0;
  int count = 0;
  int64_t end[kMaxRunsPerLaunch];
  float wd[kMaxRunsPerLaunch];
};
static_assert(sizeof(Runs) + 128 <= 4096, "a launch's runs and pointers fit CUDA's 4 KiB");

struct Hyper {  // one step's constants; gs multiplies each gradient as it is read
  float lr, b1, b2, eps, c1, c2, gs;
};

// __grid_constant__: the kernels take the table's address (run_containing) without a per-thread
// copy of it (CUDA 11.7+, compute capability 7.0+).
__global__ void adamw_kernel(float* p, const float* __restrict__ g, float* m, float* v,
                             const __grid_constant__ Runs runs, Hyper h) {
  const int64_t end = runs.end[runs.count - 1];
  int r = -1;  // the run of this thread's previous element
  for (int64_t i = runs.begin + gs_begin(); i < end; i += gs_step()) {
    r = run_containing(runs.end, runs.count, i, r);
    adamw_element(p[i], g[i] * h.gs, m[i], v[i], h.lr, h.b1, h.b2, h.c1, h.c2, h.eps, runs.wd[r]);
  }
}

template <Fmt P, Fmt G>
__global__ void adamw_mixed_kernel(void* p16, const void* g16, float* master, float* m, float* v,
                                   const __grid_constant__ Runs runs, Hyper h) {
  const int64_t end = runs.end[runs.count - 1];
  int r = -1;
  for (int64_t i = runs.begin + gs_begin(); i < end; i += gs_step()) {
    r = run_containing(runs.end, runs.count, i, r);
    const float g = load_f32<G>(g16, i) * h.gs;  // widen (exact), unscale by 1/S, clip
    adamw_element(master[i], g, m[i], v[i], h.lr, h.b1, h.b2, h.c1, h.c2, h.eps, runs.wd[r]);
    store_rounded<P>(p16, i, master[i]);  // p16 = round(master), to nearest even
  }
}

Hyper hyper(const cpu::AdamWStep& s) {
  return {s.lr, s.beta1, s.beta2, s.eps, s.c1, s.c2, s.grad_scale};
}

// launch(runs, blocks) once per kMaxRunsPerLaunch runs, with the blocks its span needs.
template <typename Launch>
void for_each_launch(const std::vector<cpu::DecayRun>& all, Launch&& launch) {
  cpu::span_of(all);  // throws for ends that do not increase
  for (size_t k0 = 0; k0 < all.size(); k0 += kMaxRunsPerLaunch) {
    Runs runs;
    runs.begin = k0 ? all[k0 - 1].end : 0;
    runs.count = static_cast<int>(std::min<size_t>(kMaxRunsPerLaunch, all.size() - k0));
    for (int k = 0; k < runs.count; ++k) {
      runs.end[k] = all[k0 + k].end;
      runs.wd[k] = all[k0 + k].weight_decay;
    }
    launch(runs, elementwise_blocks(runs.end[runs.count - 1] - runs.begin));
    LLMP_LAUNCH_CHECK();
  }
}

template <Fmt P>
void dispatch_grads(Fmt g, void* p16, const void* g16, float* master, float* m, float* v,
                    const Runs& runs, int blocks, const Hyper& h) {
  if (g == Fmt::kF32)
    adamw_mixed_kernel<P, Fmt::kF32>
        <<<blocks, kThreads, 0, stream()>>>(p16, g16, master, m, v, runs, h);
  if (g == Fmt::kF16)
    adamw_mixed_kernel<P, Fmt::kF16>
        <<<blocks, kThreads, 0, stream()>>>(p16, g16, master, m, v, runs, h);
  if (g == Fmt::kBF16)
    adamw_mixed_kernel<P, Fmt::kBF16>
        <<<blocks, kThreads, 0, stream()>>>(p16, g16, master, m, v, runs, h);
}

}  // namespace

void adamw_update(float* p, const float* g, float* m, float* v,
                  const std::vector<cpu::DecayRun>& runs, const cpu::AdamWStep& s) {
  const Hyper h = hyper(s);
  for_each_launch(runs, [&](const Runs& r, int blocks) {
    adamw_kernel<<<blocks, kThreads, 0, stream()>>>(p, g, m, v, r, h);
  });
}

void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16, DType grad_dtype,
                        float* master, float* m, float* v, const std::vector<cpu::DecayRun>& runs,
                        const cpu::AdamWStep& s) {
  const Fmt p = fmt_of(param_dtype, "cuda::adamw_update_mixed parameters");
  const Fmt g = fmt_of(grad_dtype, "cuda::adamw_update_mixed gradients");
  const Hyper h = hyper(s);
  for_each_launch(runs, [&](const Runs& r, int blocks) {
    if (p == Fmt::kF32)
      dispatch_grads<Fmt::kF32>(g, params16, grads16, master, m, v, r, blocks, h);
    if (p == Fmt::kF16)
      dispatch_grads<Fmt::kF16>(g, params16, grads16, master, m, v, r, blocks, h);
    if (p == Fmt::kBF16)
      dispatch_grads<Fmt::kBF16>(g, params16, grads16, master, m, v, r, blocks, h);
  });
}

}  // namespace cuda
}  // namespace llmp
