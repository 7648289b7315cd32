// Causal attention: cuBLAS strided-batched products around two warp-per-row softmax kernels
// (see attention.h; the GEMM arguments: gemm_args.cc).
#include "kernels/cuda/attention.h"

#include <cmath>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/gemm_args.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

// Row r of `rows` (T,T) blocks: query position i = r % T. In place, S -> P:
//   P_ij = exp(scale·(S_ij - max_{k≤i} S_ik)) / Σ_{k≤i} exp(...) for j ≤ i, 0 for j > i.
// Each lane rewrites only the entries it read, so no synchronisation is needed between passes.
__global__ void causal_softmax_kernel(float* att, int64_t rows, int T, float scale) {
  const int64_t r = warp_row(blockIdx.x, threadIdx.x);
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp, i = static_cast<int>(r % T);
  float* row = att + r * T;
  float mx = -INFINITY;
  for (int j = lane; j <= i; j += kWarp) mx = fmaxf(mx, row[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j <= i; j += kWarp) {
    const float e = softmax_exp(row[j], mx, scale);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j < T; j += kWarp) row[j] = j <= i ? row[j] * inv : 0.0f;
}

// Row r of batch entry b's H (T,T) blocks, in place in dP -> dS:
//   dS_ij = scale·P_ij·(dP_ij - Σ_{k≤i} P_ik·dP_ik) for j ≤ i, 0 for j > i.
__global__ void softmax_backward_kernel(float* dP, const float* P, int64_t rows, int T,
                                        float scale) {
  const int64_t r = warp_row(blockIdx.x, threadIdx.x);
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp, i = static_cast<int>(r % T);
  float* d = dP + r * T;
  const float* p = P + r * T;
  float dot = 0.0f;
  for (int j = lane; j <= i; j += kWarp) dot += p[j] * d[j];
  dot = warp_sum(dot);
  for (int j = lane; j < T; j += kWarp) d[j] = j <= i ? softmax_grad(p[j], d[j], dot, scale) : 0.0f;
}

float head_scale(int C, int H) { return 1.0f / std::sqrt(static_cast<float>(C / H)); }

}  // namespace

void attention_probs(float* att, const float* qkv, int B, int T, int C, int H,
                     bool sixteen_bit_inputs) {
  {
    const ExactTf32Operands tf32(sixteen_bit_inputs);  // Q, K: 16-bit values
    for (int b = 0; b < B; ++b) run_gemm(attention_scores_gemm(att, qkv, b, T, C, H));
  }
  const int64_t rows = static_cast<int64_t>(B) * H * T;
  if (rows <= 0) return;
  causal_softmax_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(att, rows, T,
                                                                              head_scale(C, H));
  LLMP_LAUNCH_CHECK();
}

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H,
                       bool sixteen_bit_inputs) {
  attention_probs(att, qkv, B, T, C, H, sixteen_bit_inputs);
  // the fresh P is fp32 (rounded to 16 bits only after this kernel): fp32 product
  for (int b = 0; b < B; ++b) run_gemm(attention_pv_gemm(out, att, qkv, b, T, C, H));
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        float* /*scratch*/, int B, int T, int C, int H,
                        bool sixteen_bit_inputs) {
  const int64_t rows = static_cast<int64_t>(H) * T;  // one batch entry's heads
  if (rows <= 0) return;
  float* dP = static_cast<float*>(workspace(sizeof(float) * rows * T));  // (H,T,T)
  const float scale = head_scale(C, H);
  for (int b = 0; b < B; ++b) {
    {
      const ExactTf32Operands tf32(sixteen_bit_inputs);  // dY, V, P: 16-bit values
      run_gemm(attention_dp_gemm(dP, dout, qkv, b, T, C, H));    // dP = dY Vᵀ
      run_gemm(attention_dv_gemm(dqkv, att, dout, b, T, C, H));  // dV = Pᵀ dY
    }
    const float* P = att + static_cast<int64_t>(b) * rows * T;
    softmax_backward_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(dP, P, rows, T,
                                                                                  scale);
    LLMP_LAUNCH_CHECK();
    run_gemm(attention_dq_gemm(dqkv, dP, qkv, b, T, C, H));  // dQ = dS K   (dS fp32)
    run_gemm(attention_dk_gemm(dqkv, dP, qkv, b, T, C, H));  // dK = dSᵀ Q  (dS fp32)
  }
}

}  // namespace cuda
}  // namespace llmp
