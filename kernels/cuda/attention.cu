// Causal attention: cuBLAS strided-batched products around two warp-per-row softmax kernels
// (see attention.h; the GEMM arguments: gemm_args.cc). Two paths by the dtype P is stored in:
//   f32     P in att itself: the scores are written into att's block and the softmax runs there
//   16-bit  each batch entry's scores in an fp32 workspace (H,T,T); the softmax writes P into att
//           in 16 bits, and the products read 16-bit operands on 16-bit tensor cores: P and dS
//           as the kernels wrote them, Q, K, V and dY as stored (or from their noted sources, or
//           rounded copies), and write out and dqkv in 16 bits where those are stored so
#include "kernels/cuda/attention.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/gemm_args.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

// Row r of `rows` fp32 score rows s of length T -> P, written as round16(P, r16) into p in format
// F (p == s for F32: in place) and, when keep_f32, also back into s; its last live key is
// g = g0 + (r mod Tl) (attention: g0 = 0, Tl = T, so g = the row's query position):
//   P_j = exp(scale·(S_j - max_{k≤g} S_k)) / Σ_{k≤g} exp(...) for j ≤ g, 0 for j > g.
// Each lane rewrites only the entries it read, so no synchronisation is needed between passes.
template <Fmt F>
__global__ void causal_softmax_kernel(float* s, void* p, int64_t rows, int Tl, int T, int g0,
                                      float scale, Round16 r16, bool keep_f32) {
  const int64_t r = warp_row(blockIdx.x, threadIdx.x);
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp, g = g0 + static_cast<int>(r % Tl);
  float* row = s + r * T;
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
  for (int j = lane; j < T; j += kWarp) {
    const float v = j <= g ? round16(row[j] * inv, r16) : 0.0f;
    if (keep_f32) row[j] = v;
    store_rounded<F>(p, r * T + j, v);
  }
}

// The same rows of dP (fp32) and P (format FP) -> dS, written as round16(dS, r16) into ds in
// format FS (ds == dP for F32: in place):
//   dS_j = scale·P_j·(dP_j - Σ_{k≤g} P_k·dP_k) for j ≤ g, 0 for j > g.
template <Fmt FP, Fmt FS>
__global__ void softmax_backward_kernel(const float* dP, const void* P, void* ds, int64_t rows,
                                        int Tl, int T, int g0, float scale, Round16 r16) {
  const int64_t r = warp_row(blockIdx.x, threadIdx.x);
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp, g = g0 + static_cast<int>(r % Tl);
  const float* d = dP + r * T;
  float dot = 0.0f;
  for (int j = lane; j <= g; j += kWarp) dot += load_f32<FP>(P, r * T + j) * d[j];
  dot = warp_sum(dot);
  for (int j = lane; j < T; j += kWarp) {
    const float v = j <= g ? round16(softmax_grad(load_f32<FP>(P, r * T + j), d[j], dot, scale),
                                     r16)
                           : 0.0f;
    store_rounded<FS>(ds, r * T + j, v);
  }
}

float head_scale(int C, int H) { return 1.0f / std::sqrt(static_cast<float>(C / H)); }

template <Fmt F>
void softmax_into(float* s, void* p, int64_t rows, int T, float scale, Round16 r, bool keep_f32) {
  causal_softmax_kernel<F><<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(
      s, p, rows, T, T, 0, scale, r, keep_f32);
  LLMP_LAUNCH_CHECK();
}

template <Fmt FP, Fmt FS>
void softmax_backward_into(const float* dP, const void* P, void* ds, int64_t rows, int T,
                           float scale, Round16 r) {
  softmax_backward_kernel<FP, FS><<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(
      dP, P, ds, rows, T, T, 0, scale, r);
  LLMP_LAUNCH_CHECK();
}

// ---- P stored in 16 bits (dtype d: f16 or bf16) ----------------------------------------------

cudaDataType_t cuda_type(DType d) { return d == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F; }
int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// One workspace for a call: sq fp32 (one entry's (H,T,T) scores or dP), ds16 (its dS in 16
// bits, when asked), and qkv's and dout's (nullable) 16-bit twins: given (the activations as
// stored), else their noted sources, else rounded copies (exact: a 16-bit att promises 16-bit
// values, attention.h).
struct Sixteen {
  float* sq = nullptr;
  void* ds16 = nullptr;
  const void* qkv16 = nullptr;
  const void* dout16 = nullptr;
};

Sixteen sixteen_bit_workspace(DType d, int64_t sq, bool ds16, const float* qkv, int64_t n_qkv,
                              const float* dout, int64_t n_dout, const void* qkv16 = nullptr,
                              const void* dout16 = nullptr) {
  Sixteen w;
  w.qkv16 = qkv16 ? qkv16 : noted_sixteen_bit_source(qkv, n_qkv, d);
  w.dout16 = dout16 ? dout16 : dout ? noted_sixteen_bit_source(dout, n_dout, d) : nullptr;
  const int64_t sq_bytes = aligned(sq * 4), ds_bytes = ds16 ? aligned(sq * 2) : 0;
  const int64_t qkv_bytes = w.qkv16 ? 0 : aligned(n_qkv * 2);
  const int64_t dout_bytes = !dout || w.dout16 ? 0 : n_dout * 2;
  char* ws = static_cast<char*>(
      workspace(static_cast<size_t>(sq_bytes + ds_bytes + qkv_bytes + dout_bytes)));
  w.sq = reinterpret_cast<float*>(ws);
  if (ds16) w.ds16 = ws + sq_bytes;
  if (!w.qkv16) {
    round_to(qkv, ws + sq_bytes + ds_bytes, d, n_qkv);
    w.qkv16 = ws + sq_bytes + ds_bytes;
  }
  if (dout && !w.dout16) {
    round_to(dout, ws + sq_bytes + ds_bytes + qkv_bytes, d, n_dout);
    w.dout16 = ws + sq_bytes + ds_bytes + qkv_bytes;
  }
  return w;
}

// Forward with P stored in 16 bits: per batch entry, S = Q Kᵀ into the workspace (16-bit tensor
// cores), the softmax writing P into att; then (out non-null) Y = P V: on 16-bit tensor cores
// from the stored P when probs_dtype is att's dtype, else from the fp32 P the softmax also kept
// in the workspace (rounded to probs_dtype: TF32 when that is 16-bit, as the f32 path).
// With the activations as stored (the overloads at the end of this file): out16 and qkv16 are
// out's and qkv's 16 bits (nullptr: fp32), and out and qkv then are only the pointers the
// products are laid out on (the 16-bit buffers' own addresses, never read or written as fp32).
template <Fmt F>
void forward_sixteen(float* out, void* att, DType d, const float* qkv, int B, int T, int C, int H,
                     DType probs_dtype, void* out16 = nullptr, const void* qkv16 = nullptr) {
  const int64_t sq = static_cast<int64_t>(H) * T * T;
  const Round16 r = round16_of(probs_dtype, "cuda::attention_forward");
  const bool p16 = probs_dtype == d;  // P V reads the P the softmax stored
  const Sixteen w = sixteen_bit_workspace(d, sq, false, qkv, int64_t{B} * T * 3 * C, nullptr, 0,
                                          qkv16);
  const cudaDataType_t type = cuda_type(d);
  for (int b = 0; b < B; ++b) {
    const GemmArgs s = attention_scores_gemm(w.sq, qkv, b, T, C, H);
    run_gemm_16bit(s, twin_at(w.qkv16, qkv, s.A), twin_at(w.qkv16, qkv, s.B), type);
    void* P = static_cast<uint16_t*>(att) + b * sq;
    softmax_into<F>(w.sq, P, H * static_cast<int64_t>(T), T, head_scale(C, H), r, out && !p16);
    if (!out) continue;
    const GemmArgs g = attention_pv_gemm(out, w.sq, qkv, b, T, C, H);
    if (p16) {
      run_gemm_16bit(g, twin_at(w.qkv16, qkv, g.A), twin_at(P, w.sq, g.B), type,
                     out16 ? twin_at(out16, out, g.C) : nullptr);
    } else {
      const ExactTf32Operands tf32(r != Round16::kNone);
      run_gemm(g);
    }
  }
}

// Backward with P stored in 16 bits: per batch entry, dP = dY Vᵀ and dV = Pᵀ dY on 16-bit
// tensor cores (P as stored), the softmax backward into dS, then dQ = dS K and dK = dSᵀ Q: on
// 16-bit tensor cores from a 16-bit dS when probs_dtype is att's dtype, else in fp32 on the
// workspace's dS (TF32 when rounded to a 16-bit probs_dtype).
// (dqkv16, dout16, qkv16: as forward_sixteen's.)
template <Fmt F>
void backward_sixteen(float* dqkv, const float* dout, const float* qkv, const void* att, DType d,
                      int B, int T, int C, int H, DType probs_dtype, void* dqkv16 = nullptr,
                      const void* dout16 = nullptr, const void* qkv16 = nullptr) {
  const int64_t sq = static_cast<int64_t>(H) * T * T, rows = static_cast<int64_t>(H) * T;
  const Round16 r = round16_of(probs_dtype, "cuda::attention_backward");
  const bool ds16 = probs_dtype == d;
  const Sixteen w = sixteen_bit_workspace(d, sq, ds16, qkv, int64_t{B} * T * 3 * C, dout,
                                          int64_t{B} * T * C, qkv16, dout16);
  auto c16 = [&](const GemmArgs& g) { return dqkv16 ? twin_at(dqkv16, dqkv, g.C) : nullptr; };
  const cudaDataType_t type = cuda_type(d);
  const float scale = head_scale(C, H);
  for (int b = 0; b < B; ++b) {
    const void* P = static_cast<const uint16_t*>(att) + b * sq;
    const GemmArgs dp = attention_dp_gemm(w.sq, dout, qkv, b, T, C, H);  // dP = dY Vᵀ
    run_gemm_16bit(dp, twin_at(w.qkv16, qkv, dp.A), twin_at(w.dout16, dout, dp.B), type);
    const GemmArgs dv = attention_dv_gemm(dqkv, w.sq, dout, b, T, C, H);  // dV = Pᵀ dY
    run_gemm_16bit(dv, twin_at(w.dout16, dout, dv.A), twin_at(P, w.sq, dv.B), type, c16(dv));
    if (ds16)
      softmax_backward_into<F, F>(w.sq, P, w.ds16, rows, T, scale, r);
    else
      softmax_backward_into<F, Fmt::kF32>(w.sq, P, w.sq, rows, T, scale, r);
    const GemmArgs dq = attention_dq_gemm(dqkv, w.sq, qkv, b, T, C, H);  // dQ = dS K
    const GemmArgs dk = attention_dk_gemm(dqkv, w.sq, qkv, b, T, C, H);  // dK = dSᵀ Q
    if (ds16) {
      run_gemm_16bit(dq, twin_at(w.qkv16, qkv, dq.A), twin_at(w.ds16, w.sq, dq.B), type,
                     c16(dq));
      run_gemm_16bit(dk, twin_at(w.qkv16, qkv, dk.A), twin_at(w.ds16, w.sq, dk.B), type,
                     c16(dk));
    } else {
      const ExactTf32Operands tf32(r != Round16::kNone);
      run_gemm(dq);
      run_gemm(dk);
    }
  }
}

}  // namespace

void causal_softmax(float* s, int64_t rows, int Tl, int T, int g0, float scale, Round16 r) {
  if (rows <= 0) return;
  causal_softmax_kernel<Fmt::kF32><<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(
      s, s, rows, Tl, T, g0, scale, r, false);
  LLMP_LAUNCH_CHECK();
}

void causal_softmax_backward(float* dp, const float* P, int64_t rows, int Tl, int T, int g0,
                             float scale, Round16 r) {
  if (rows <= 0) return;
  softmax_backward_kernel<Fmt::kF32, Fmt::kF32>
      <<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(dp, P, dp, rows, Tl, T, g0, scale, r);
  LLMP_LAUNCH_CHECK();
}

void attention_probs(void* att, DType att_dtype, const float* qkv, int B, int T, int C, int H,
                     bool sixteen_bit_inputs, DType probs_dtype) {
  const Round16 r = round16_of(probs_dtype, "cuda::attention_probs");
  const Fmt f = fmt_of(att_dtype, "cuda::attention_probs: att");
  if (B <= 0 || T <= 0) return;
  if (f == Fmt::kBF16) return forward_sixteen<Fmt::kBF16>(nullptr, att, att_dtype, qkv, B, T, C, H,
                                                          probs_dtype);
  if (f == Fmt::kF16) return forward_sixteen<Fmt::kF16>(nullptr, att, att_dtype, qkv, B, T, C, H,
                                                        probs_dtype);
  float* P = static_cast<float*>(att);
  const int64_t sq = static_cast<int64_t>(H) * T * T;
  {
    const ExactTf32Operands tf32(sixteen_bit_inputs);  // Q, K: 16-bit values
    for (int b = 0; b < B; ++b) run_gemm(attention_scores_gemm(P + b * sq, qkv, b, T, C, H));
  }
  causal_softmax(P, static_cast<int64_t>(B) * H * T, T, T, 0, head_scale(C, H), r);
}

void attention_forward(float* out, void* att, DType att_dtype, const float* qkv, int B, int T,
                       int C, int H, bool sixteen_bit_inputs, DType probs_dtype) {
  const Fmt f = fmt_of(att_dtype, "cuda::attention_forward: att");
  (void)round16_of(probs_dtype, "cuda::attention_forward");  // a bad probs_dtype throws here
  if (B <= 0 || T <= 0) return;
  if (f == Fmt::kBF16)
    return forward_sixteen<Fmt::kBF16>(out, att, att_dtype, qkv, B, T, C, H, probs_dtype);
  if (f == Fmt::kF16)
    return forward_sixteen<Fmt::kF16>(out, att, att_dtype, qkv, B, T, C, H, probs_dtype);
  attention_probs(att, att_dtype, qkv, B, T, C, H, sixteen_bit_inputs, probs_dtype);
  // TF32 when P was rounded to 16 bits by the softmax and V is a 16-bit value, else fp32
  const ExactTf32Operands tf32(sixteen_bit_inputs && probs_dtype != DType::kF32);
  const float* P = static_cast<const float*>(att);
  const int64_t sq = static_cast<int64_t>(H) * T * T;
  for (int b = 0; b < B; ++b) run_gemm(attention_pv_gemm(out, P + b * sq, qkv, b, T, C, H));
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const void* att,
                        DType att_dtype, float* /*scratch*/, int B, int T, int C, int H,
                        bool sixteen_bit_inputs, DType probs_dtype) {
  const Round16 r = round16_of(probs_dtype, "cuda::attention_backward");
  const Fmt f = fmt_of(att_dtype, "cuda::attention_backward: att");
  const int64_t rows = static_cast<int64_t>(H) * T;  // one batch entry's heads
  if (B <= 0 || rows <= 0) return;
  if (f == Fmt::kBF16)
    return backward_sixteen<Fmt::kBF16>(dqkv, dout, qkv, att, att_dtype, B, T, C, H, probs_dtype);
  if (f == Fmt::kF16)
    return backward_sixteen<Fmt::kF16>(dqkv, dout, qkv, att, att_dtype, B, T, C, H, probs_dtype);
  float* dP = static_cast<float*>(workspace(sizeof(float) * rows * T));  // (H,T,T)
  const float scale = head_scale(C, H);
  for (int b = 0; b < B; ++b) {
    const float* P = static_cast<const float*>(att) + static_cast<int64_t>(b) * rows * T;
    {
      const ExactTf32Operands tf32(sixteen_bit_inputs);  // dY, V, P: 16-bit values
      run_gemm(attention_dp_gemm(dP, dout, qkv, b, T, C, H));  // dP = dY Vᵀ
      run_gemm(attention_dv_gemm(dqkv, P, dout, b, T, C, H));  // dV = Pᵀ dY
    }
    causal_softmax_backward(dP, P, rows, T, T, 0, scale, r);  // dP -> dS, rounded to r
    // dS (16-bit when rounded), K and Q (16-bit inputs): TF32, else fp32
    const ExactTf32Operands tf32(sixteen_bit_inputs && r != Round16::kNone);
    run_gemm(attention_dq_gemm(dqkv, dP, qkv, b, T, C, H));  // dQ = dS K
    run_gemm(attention_dk_gemm(dqkv, dP, qkv, b, T, C, H));  // dK = dSᵀ Q
  }
}

// ---- Activations as stored (attention.h) ----------------------------------------------------

bool attention_takes_stored(DType att_dtype, DType probs_dtype,
                            std::initializer_list<DType> dtypes) {
  bool all_f32 = true, all_of_att = true;
  for (DType t : dtypes) {
    all_f32 = all_f32 && t == DType::kF32;
    all_of_att = all_of_att && (t == DType::kF32 || t == att_dtype);
  }
  const bool sixteen = att_dtype == DType::kBF16 || att_dtype == DType::kF16;
  return all_f32 || (sixteen && probs_dtype == att_dtype && all_of_att);
}

namespace {

// std::invalid_argument unless the overloads take these activations as they are.
void require_stored(const char* entry, DType att_dtype, DType probs_dtype,
                    std::initializer_list<DType> dtypes) {
  if (attention_takes_stored(att_dtype, probs_dtype, dtypes)) return;
  std::string got;
  for (DType t : dtypes) got += std::string(got.empty() ? "" : ", ") + to_string(t);
  throw std::invalid_argument(std::string(entry) + ": activations of dtypes " + got +
                              " with att " + to_string(att_dtype) + " and probs " +
                              to_string(probs_dtype) + " are not taken as stored (16-bit ones "
                              "only of att's dtype, when P and dS are rounded to it)");
}

bool is16(DType t) { return t != DType::kF32; }

}  // namespace

void attention_forward(void* out, DType out_dtype, void* att, DType att_dtype, const void* qkv,
                       DType qkv_dtype, int B, int T, int C, int H, bool sixteen_bit_inputs,
                       DType probs_dtype) {
  require_stored("cuda::attention_forward", att_dtype, probs_dtype, {out_dtype, qkv_dtype});
  float* o = static_cast<float*>(out);
  const float* q = static_cast<const float*>(qkv);
  if (!is16(out_dtype) && !is16(qkv_dtype))
    return attention_forward(o, att, att_dtype, q, B, T, C, H, sixteen_bit_inputs, probs_dtype);
  if (B <= 0 || T <= 0) return;
  void* o16 = is16(out_dtype) ? out : nullptr;
  const void* q16 = is16(qkv_dtype) ? qkv : nullptr;
  if (att_dtype == DType::kBF16)
    forward_sixteen<Fmt::kBF16>(o, att, att_dtype, q, B, T, C, H, probs_dtype, o16, q16);
  else
    forward_sixteen<Fmt::kF16>(o, att, att_dtype, q, B, T, C, H, probs_dtype, o16, q16);
}

void attention_probs(void* att, DType att_dtype, const void* qkv, DType qkv_dtype, int B, int T,
                     int C, int H, bool sixteen_bit_inputs, DType probs_dtype) {
  require_stored("cuda::attention_probs", att_dtype, probs_dtype, {qkv_dtype});
  const float* q = static_cast<const float*>(qkv);
  if (!is16(qkv_dtype))
    return attention_probs(att, att_dtype, q, B, T, C, H, sixteen_bit_inputs, probs_dtype);
  if (B <= 0 || T <= 0) return;
  if (att_dtype == DType::kBF16)
    forward_sixteen<Fmt::kBF16>(nullptr, att, att_dtype, q, B, T, C, H, probs_dtype, nullptr, qkv);
  else
    forward_sixteen<Fmt::kF16>(nullptr, att, att_dtype, q, B, T, C, H, probs_dtype, nullptr, qkv);
}

void attention_backward(void* dqkv, DType dqkv_dtype, const void* dout, DType dout_dtype,
                        const void* qkv, DType qkv_dtype, const void* att, DType att_dtype,
                        float* scratch, int B, int T, int C, int H, bool sixteen_bit_inputs,
                        DType probs_dtype) {
  require_stored("cuda::attention_backward", att_dtype, probs_dtype,
                 {dqkv_dtype, dout_dtype, qkv_dtype});
  float* dq = static_cast<float*>(dqkv);
  const float* dy = static_cast<const float*>(dout);
  const float* q = static_cast<const float*>(qkv);
  if (!is16(dqkv_dtype) && !is16(dout_dtype) && !is16(qkv_dtype))
    return attention_backward(dq, dy, q, att, att_dtype, scratch, B, T, C, H, sixteen_bit_inputs,
                              probs_dtype);
  if (B <= 0 || T <= 0) return;
  void* dq16 = is16(dqkv_dtype) ? dqkv : nullptr;
  const void* dy16 = is16(dout_dtype) ? dout : nullptr;
  const void* q16 = is16(qkv_dtype) ? qkv : nullptr;
  if (att_dtype == DType::kBF16)
    backward_sixteen<Fmt::kBF16>(dq, dy, q, att, att_dtype, B, T, C, H, probs_dtype, dq16, dy16,
                                 q16);
  else
    backward_sixteen<Fmt::kF16>(dq, dy, q, att, att_dtype, B, T, C, H, probs_dtype, dq16, dy16,
                                q16);
}

}  // namespace cuda
}  // namespace llmp
