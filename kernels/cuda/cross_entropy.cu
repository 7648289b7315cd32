// Cross-entropy's three steps, one block per row (see cross_entropy.h).
#include "kernels/cuda/cross_entropy.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
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

__global__ void exp_sums_kernel(float* sums, float* z, const int32_t* __restrict__ y, int v0,
                                int N, int Vr, const float* __restrict__ m) {
  const int n = blockIdx.x;
  float* row = z + static_cast<int64_t>(n) * Vr;
  const int local = y[n] - v0;
  if (threadIdx.x == 0) sums[N + n] = (local >= 0 && local < Vr) ? row[local] : 0.0f;
  __syncthreads();  // the target logit is read before any thread overwrites it
  const float mn = m[n];
  float s = 0.0f;
  for (int v = threadIdx.x; v < Vr; v += blockDim.x) {
    const float e = softmax_exp(row[v], mn, 1.0f);  // exp(z - m)
    row[v] = e;
    s += e;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) sums[n] = s;
}

__global__ void loss_kernel(double* row_loss, float* z, const int32_t* __restrict__ y, int v0,
                            int N, int Vr, const float* __restrict__ m,
                            const float* __restrict__ sums, float dloss, bool backward) {
  const int n = blockIdx.x;
  const float s = sums[n], zy = sums[N + n];
  if (backward) {
    float* row = z + static_cast<int64_t>(n) * Vr;
    const int local = y[n] - v0;
    const float scale = dloss / s;
    for (int v = threadIdx.x; v < Vr; v += blockDim.x)
      row[v] = ce_grad(row[v], scale, v == local, dloss);
  }
  if (threadIdx.x == 0) row_loss[n] = ce_row_loss(m[n], s, zy);
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

void cross_entropy_exp_sums(float* sums, float* z, const int32_t* y, int v0, int N, int Vr,
                            const float* m) {
  if (N <= 0) return;
  exp_sums_kernel<<<N, kThreads, 0, stream()>>>(sums, z, y, v0, N, Vr, m);
  LLMP_LAUNCH_CHECK();
}

double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                          const float* sums, float dloss, bool backward) {
  if (N <= 0) return 0.0;
  double* ws = static_cast<double*>(workspace(sizeof(double) * (N + 1)));  // N row losses, total
  loss_kernel<<<N, kThreads, 0, stream()>>>(ws, z, y, v0, N, Vr, m, sums, dloss, backward);
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
