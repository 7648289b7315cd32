// Cross-entropy's steps, one block per row (see cross_entropy.h).
#include "kernels/cuda/cross_entropy.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

__global__ void row_max_kernel(float* m, const float* __restrict__ z, int Vr) {
  const float* row = z + static_cast<int64_t>(blockIdx.x) * Vr;
  float mx = -INFINITY;
  for (int v = threadIdx.x; v < Vr; v += blockDim.x) mx = fmaxf(mx, row[v]);
  mx = block_max(mx);
  if (threadIdx.x == 0) m[blockIdx.x] = mx;
}

// The target logit z_n[y_n] when this rank holds it, else 0 (a reduction's neutral element).
__device__ float target_logit(const float* row, int local, int Vr) {
  return (local >= 0 && local < Vr) ? row[local] : 0.0f;
}

__global__ void exp_sums_kernel(float* sums, const float* __restrict__ z,
                                const int32_t* __restrict__ y, int v0, int N, int Vr,
                                const float* __restrict__ m) {
  const int n = blockIdx.x;
  const float* row = z + static_cast<int64_t>(n) * Vr;
  if (threadIdx.x == 0) sums[N + n] = target_logit(row, y[n] - v0, Vr);
  const float mn = m[n];
  float s = 0.0f;
  for (int v = threadIdx.x; v < Vr; v += blockDim.x) s += softmax_exp(row[v], mn, 1.0f);
  s = block_sum(s);
  if (threadIdx.x == 0) sums[n] = s;
}

// Steps 1 and 2 in one read: each thread's running max mt and Σ exp(z - mt) over its elements
// (rescaled by exp(mt_old - mt_new) when the max grows), then the block's max M and
// Σ_threads st·exp(mt - M). A -inf logit (a padded vocabulary's, gpt_embed_head.cc) adds 0, and
// so does a thread that saw nothing else; a NaN logit makes the sum NaN, as in the two steps.
__global__ void max_sums_kernel(float* m, float* sums, const float* __restrict__ z,
                                const int32_t* __restrict__ y, int v0, int N, int Vr) {
  const int n = blockIdx.x;
  const float* row = z + static_cast<int64_t>(n) * Vr;
  if (threadIdx.x == 0) sums[N + n] = target_logit(row, y[n] - v0, Vr);
  float mt = -INFINITY, st = 0.0f;
  for (int v = threadIdx.x; v < Vr; v += blockDim.x) {
    const float zv = row[v];
    if (zv > mt) {
      st = st * softmax_exp(mt, zv, 1.0f) + 1.0f;  // exp(-inf) = 0 for the first element
      mt = zv;
    } else if (zv != -INFINITY) {  // exp(-inf - -inf) would be NaN
      st += softmax_exp(zv, mt, 1.0f);
    }
  }
  const float M = block_max(mt);
  st = block_sum(st == 0.0f ? 0.0f : st * softmax_exp(mt, M, 1.0f));
  if (threadIdx.x == 0) {
    m[n] = M;
    sums[n] = st;
  }
}

__global__ void loss_kernel(double* row_loss, float* z, const int32_t* __restrict__ y, int v0,
                            int N, int Vr, const float* __restrict__ m,
                            const float* __restrict__ sums, float dloss, bool backward,
                            Round16 r) {
  const int n = blockIdx.x;
  const float s = sums[n], zy = sums[N + n], mn = m[n];
  if (backward) {  // z ← round(dloss·exp(z - m)/s - dloss·onehot(y))
    float* row = z + static_cast<int64_t>(n) * Vr;
    const int local = y[n] - v0;
    const float scale = dloss / s;
    for (int v = threadIdx.x; v < Vr; v += blockDim.x)
      row[v] = round16(ce_grad(softmax_exp(row[v], mn, 1.0f), scale, v == local, dloss), r);
  }
  if (threadIdx.x == 0) row_loss[n] = ce_row_loss(mn, s, zy);
}

// One block: out[0] = Σ_i x[i].
__global__ void sum_doubles_kernel(double* out, const double* __restrict__ x, int n) {
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

}  // namespace

void cross_entropy_row_max(float* m, const float* z, int N, int Vr) {
  if (N <= 0) return;
  row_max_kernel<<<N, kThreads, 0, stream()>>>(m, z, Vr);
  LLMP_LAUNCH_CHECK();
}

void cross_entropy_exp_sums(float* sums, const float* z, const int32_t* y, int v0, int N, int Vr,
                            const float* m) {
  if (N <= 0) return;
  exp_sums_kernel<<<N, kThreads, 0, stream()>>>(sums, z, y, v0, N, Vr, m);
  LLMP_LAUNCH_CHECK();
}

void cross_entropy_max_sums(float* m, float* sums, const float* z, const int32_t* y, int v0,
                            int N, int Vr) {
  if (N <= 0) return;
  max_sums_kernel<<<N, kThreads, 0, stream()>>>(m, sums, z, y, v0, N, Vr);
  LLMP_LAUNCH_CHECK();
}

double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                          const float* sums, float dloss, bool backward, DType grad_dtype) {
  const Round16 r = round16_of(grad_dtype, "cuda::cross_entropy_loss gradient");
  if (N <= 0) return 0.0;
  double* ws = static_cast<double*>(workspace(sizeof(double) * (N + 1)));  // N row losses, total
  loss_kernel<<<N, kThreads, 0, stream()>>>(ws, z, y, v0, N, Vr, m, sums, dloss, backward, r);
  LLMP_LAUNCH_CHECK();
  sum_doubles_kernel<<<1, kThreads, 0, stream()>>>(ws + N, ws, N);
  LLMP_LAUNCH_CHECK();
  double total = 0.0;
  CUDA_CHECK(cudaMemcpyAsync(&total, ws + N, sizeof(double), cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  return total;
}

}  // namespace cuda
}  // namespace llmp
