// Causal attention: cuBLAS strided-batched products around two warp-per-row softmax kernels
// (see attention.h; the GEMM arguments: gemm_args.cc).
#include "kernels/cuda/attention.h"

#include <cmath>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/gemm_args.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

// Row r of `rows` score rows of length T, in place, S -> P; its last live key is
// g = g0 + (r mod Tl) (attention: g0 = 0, Tl = T, so g = the row's query position):
//   P_j = exp(scale·(S_j - max_{k≤g} S_k)) / Σ_{k≤g} exp(...) for j ≤ g, 0 for j > g.
// Each lane rewrites only the entries it read, so no synchronisation is needed between passes.
__global__ void causal_softmax_kernel(float* att, int64_t rows, int Tl, int T, int g0,
                                      float scale, Round16 r16) {
  const int64_t r = warp_row(blockIdx.x, threadIdx.x);
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp, g = g0 + static_cast<int>(r % Tl);
  float* row = att + r * T;
  float mx = -INFINITY;
  for (int j = lane; j <= g; j += kWarp) mx = fmaxf(mx, row[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j <= g; j += kWarp) {
    const float e = softmax_exp(row[j], mx, scale);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j < T; j += kWarp) row[j] = j <= g ? round16(row[j] * inv, r16) : 0.0f;
}

// The same rows, in place in dP -> dS:
//   dS_j = scale·P_j·(dP_j - Σ_{k≤g} P_k·dP_k) for j ≤ g, 0 for j > g.
__global__ void softmax_backward_kernel(float* dP, const float* P, int64_t rows, int Tl, int T,
                                        int g0, float scale, Round16 r16) {
  const int64_t r = warp_row(blockIdx.x, threadIdx.x);
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp, g = g0 + static_cast<int>(r % Tl);
  float* d = dP + r * T;
  const float* p = P + r * T;
  float dot = 0.0f;
  for (int j = lane; j <= g; j += kWarp) dot += p[j] * d[j];
  dot = warp_sum(dot);
  for (int j = lane; j < T; j += kWarp)
    d[j] = j <= g ? round16(softmax_grad(p[j], d[j], dot, scale), r16) : 0.0f;
}

float head_scale(int C, int H) { return 1.0f / std::sqrt(static_cast<float>(C / H)); }

}  // namespace

void causal_softmax(float* s, int64_t rows, int Tl, int T, int g0, float scale, Round16 r) {
  if (rows <= 0) return;
  causal_softmax_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(s, rows, Tl, T, g0,
                                                                              scale, r);
  LLMP_LAUNCH_CHECK();
}

void causal_softmax_backward(float* dp, const float* P, int64_t rows, int Tl, int T, int g0,
                             float scale, Round16 r) {
  if (rows <= 0) return;
  softmax_backward_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(dp, P, rows, Tl, T,
                                                                                g0, scale, r);
  LLMP_LAUNCH_CHECK();
}

void attention_probs(float* att, const float* qkv, int B, int T, int C, int H,
                     bool sixteen_bit_inputs, DType probs_dtype) {
  const Round16 r = round16_of(probs_dtype, "cuda::attention_probs");
  {
    const ExactTf32Operands tf32(sixteen_bit_inputs);  // Q, K: 16-bit values
    for (int b = 0; b < B; ++b) run_gemm(attention_scores_gemm(att, qkv, b, T, C, H));
  }
  causal_softmax(att, static_cast<int64_t>(B) * H * T, T, T, 0, head_scale(C, H), r);
}

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H,
                       bool sixteen_bit_inputs, DType probs_dtype) {
  attention_probs(att, qkv, B, T, C, H, sixteen_bit_inputs, probs_dtype);
  // TF32 when P was rounded to 16 bits by the softmax and V is a 16-bit value, else fp32
  const ExactTf32Operands tf32(sixteen_bit_inputs && probs_dtype != DType::kF32);
  for (int b = 0; b < B; ++b) run_gemm(attention_pv_gemm(out, att, qkv, b, T, C, H));
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        float* /*scratch*/, int B, int T, int C, int H, bool sixteen_bit_inputs,
                        DType probs_dtype) {
  const Round16 r = round16_of(probs_dtype, "cuda::attention_backward");
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
    causal_softmax_backward(dP, P, rows, T, T, 0, scale, r);  // dP -> dS, rounded to r
    // dS (16-bit when rounded), K and Q (16-bit inputs): TF32, else fp32
    const ExactTf32Operands tf32(sixteen_bit_inputs && r != Round16::kNone);
    run_gemm(attention_dq_gemm(dqkv, dP, qkv, b, T, C, H));  // dQ = dS K
    run_gemm(attention_dk_gemm(dqkv, dP, qkv, b, T, C, H));  // dK = dSᵀ Q
  }
}

}  // namespace cuda
}  // namespace llmp
