// The per-element and per-row math of the CUDA kernels, compiled by both g++ and nvcc.
//
// What: every formula the kernels of kernels/cuda apply to one element (GELU and its derivative,
// the AdamW update, fp32 -> f16/bf16 rounding, the LayerNorm, softmax and cross-entropy element
// steps given their row statistics). Why a shared header: this machine has no GPU, so no kernel
// runs here; but with LLMP_HD = __host__ __device__ under nvcc (and nothing under g++) the very
// functions the kernels call are also callable on the host, where shared_math_test compares them
// with kernels/cpu on random inputs. A kernel then only adds the parallel part (which thread owns
// which element, the row reductions), and that part is what kernels_twin_test checks on a GPU.
//
// The row reductions themselves (Σ over a row) are not here: on the GPU they are warp/block
// shuffles, on the host a loop; the tests compute them sequentially and pass the sums in.
//
// Glossary: x input element, dy upstream gradient, C channels of a LayerNorm row, hs head size,
// t AdamW step (1-based), m/v Adam moments, c1/c2 the bias corrections 1/(1-β^t).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/hd.h"


namespace llmp {
namespace cuda {

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π), as kernels/cpu/gelu.cc
constexpr float kGeluCubic = 0.044715f;
constexpr float kLnEps = 1e-5f;  // GPT-2's LayerNorm epsilon (kernels/cpu/layernorm.h)

// ---- GELU, tanh approximation (Hendrycks & Gimpel 2016) ----------------------------------------

/// gelu(x) = ½·x·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³).
LLMP_HD float gelu(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * x * (1.0f + t);
}

/// gelu'(x) = ½·(1 + t) + ½·x·(1 - t²)·√(2/π)·(1 + 3·0.044715·x²),  t = tanh(u).
LLMP_HD float gelu_grad(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

// ---- LayerNorm (Ba et al. 2016), one row of C channels ----------------------------------------

/// mean = Σ_c x_c / C, from the row sum.
LLMP_HD float ln_mean(float sum, int C) { return sum / static_cast<float>(C); }

/// rstd = 1/√(Σ_c (x_c - mean)² / C + eps): the BIASED variance, as GPT-2 and kernels/cpu.
LLMP_HD float ln_rstd(float centered_sq_sum, int C) {
  return 1.0f / sqrtf(centered_sq_sum / static_cast<float>(C) + kLnEps);
}

/// y_c = (x_c - mean)·rstd·w_c + b_c.
LLMP_HD float ln_normalize(float x, float mean, float rstd, float w, float b) {
  return (x - mean) * rstd * w + b;
}

/// dx_c = rstd·(dx̂_c - mean_c(dx̂) - x̂_c·mean_c(dx̂·x̂)), dx̂ = dy·w, given the two row means.
LLMP_HD float ln_dx(float dxhat, float xhat, float mean_dxhat, float mean_dxhat_xhat, float rstd) {
  return rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
}

// ---- Causal softmax of attention scores (Vaswani et al. 2017 §3.2.2) ---------------------------

/// P_ij = exp(scale·(s_ij - max_i)) / Σ_i, for j ≤ i (the row max taken over the raw scores
/// s = q·k, before the 1/√hs scale: scale > 0 keeps the argmax). inv_sum = 1/Σ_j exp(...).
LLMP_HD float softmax_exp(float s, float row_max, float scale) {
  return expf(scale * (s - row_max));
}

/// dS_ij = scale·P_ij·(dP_ij - Σ_k P_ik·dP_ik): softmax backward times the 1/√hs of S.
LLMP_HD float softmax_grad(float p, float dp, float row_dot, float scale) {
  return scale * p * (dp - row_dot);
}

// ---- Softmax cross-entropy (kernels/cpu/cross_entropy.h) ---------------------------------------

/// The gradient of dloss·loss w.r.t. one logit, from e = exp(z - m) (step 2's value) and the
/// row's full Σ exp: dloss·e/s, minus dloss at the target.
LLMP_HD float ce_grad(float e, float dloss_over_s, bool is_target, float dloss) {
  return e * dloss_over_s - (is_target ? dloss : 0.0f);
}

/// loss_n = m_n + log s_n - z_n[y_n], in double (a difference of two O(ln V) numbers).
LLMP_HD double ce_row_loss(float m, float s, float zy) {
  return static_cast<double>(m) + log(static_cast<double>(s)) - static_cast<double>(zy);
}

// ---- AdamW (Loshchilov & Hutter 2019, Algorithm 2), one element --------------------------------

/// 1/(1-β^t), computed once per step on the host (double pow, as common/optim/adamw.cc).
inline float adamw_bias_correction(float beta, int64_t t) {
  return 1.0f / (1.0f - static_cast<float>(std::pow(beta, t)));
}

/// m ← β1·m + (1-β1)·g,  v ← β2·v + (1-β2)·g²,  p ← p - lr·(m·c1 / (√(v·c2) + ε) + wd·p).
LLMP_HD void adamw_element(float& p, float g, float& m, float& v, float lr, float b1, float b2,
                           float c1, float c2, float eps, float wd) {
  m = b1 * m + (1.0f - b1) * g;
  v = b2 * v + (1.0f - b2) * g * g;
  const float m_hat = m * c1, v_hat = v * c2;
  p -= lr * (m_hat / (sqrtf(v_hat) + eps) + wd * p);
}

/// The run k of element i: end[k-1] ≤ i < end[k] (end ascending, count ≥ 1, i < end[count-1],
/// i at or after the first run's start). `hint`: a run at or before k (the run of an earlier
/// element of the same thread, whose elements only increase), or -1: then a binary search.
LLMP_HD int run_containing(const int64_t* end, int count, int64_t i, int hint) {
  if (hint < 0) {
    int lo = 0, hi = count - 1;  // the first run whose end is past i
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (end[mid] > i) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
  while (end[hint] <= i) ++hint;
  return hint;
}

// ---- fp32 <-> f16 / bf16 bits, round to nearest even (kernels/cpu/convert.h) -------------------

LLMP_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

LLMP_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

/// bf16 = the top 16 bits of fp32, rounded to nearest even: add 0x7FFF plus the lowest kept
/// bit, then truncate (a carry into the exponent is the correct rounding, up to inf). NaN stays
/// a quiet NaN with its sign.
LLMP_HD uint16_t bf16_from_f32(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

LLMP_HD float f32_from_bf16(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

/// f16 (1, 5, 10 bits, bias 15) from fp32 (bias 127), round to nearest even:
///   |x| ≥ 65520 (halfway past 65504, ties to the even inf) -> inf;  NaN -> quiet NaN;
///   normal: re-bias the exponent (−112·2²³) and round the 13 dropped mantissa bits;
///   |x| < 2⁻¹⁴ (f16 subnormal or 0): |x| + 0.5f puts the value in units of 2⁻²⁴ (the f16
///   subnormal step) into the low mantissa bits of a float in [0.5, 1), rounded by the fp32 add.
LLMP_HD uint16_t f16_from_f32(float f) {
  uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u;   // NaN
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // inf, or rounds to it
  if (x >= 0x38800000u) {                       // normal in f16
    x += 0x0FFFu + ((x >> 13) & 1u);            // round the 13 dropped bits to nearest even
    return sign | static_cast<uint16_t>((x - 0x38000000u) >> 13);
  }
  const float t = f32_from_bits(x) + 0.5f;
  return sign | static_cast<uint16_t>(f32_bits(t) - 0x3F000000u);
}

/// f16 bits -> fp32, exact.
LLMP_HD float f32_from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {  // zero or subnormal: m·2⁻²⁴, exact in fp32
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31) return f32_from_bits(sign | 0x7F800000u | (m << 13));  // inf / NaN
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

/// Which 16-bit values a kernel makes its fp32 outputs (kNone: leaves them as they are).
enum class Round16 { kNone, kF16, kBF16 };

/// x after a round trip through f16 or bf16 (nearest even; kNone: x): a 16-bit value kept in
/// fp32, the twin of kernels/cpu/convert.h round_trip. Attention's softmax kernels make P and dS
/// such values when the walk declares 16-bit operands (attention.h); so does cross-entropy's
/// gradient (cross_entropy.cu).
LLMP_HD float round16(float x, Round16 r) {
  if (r == Round16::kBF16) return f32_from_bf16(bf16_from_f32(x));
  if (r == Round16::kF16) return f32_from_f16(f16_from_f32(x));
  return x;
}

}  // namespace cuda
}  // namespace llmp
