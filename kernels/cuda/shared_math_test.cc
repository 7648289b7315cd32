// shared_math.h on the host, against the CPU twins: the functions the CUDA kernels call, run
// here through g++ (no GPU needed). Each test states its bound next to the check.
//
// What is compared: GELU and its derivative with kernels/cpu/gelu; the LayerNorm row steps
// (mean, rstd, normalize, the backward element) with kernels/cpu/layernorm, the row sums done
// here in order; the cross-entropy gradient and row loss with kernels/cpu/cross_entropy; the
// AdamW element update and bias corrections with common/optim's AdamW::step and step_mixed; the
// f16/bf16 bit conversions with kernels/cpu/convert (Eigen::half / Eigen::bfloat16). The softmax
// element steps are checked inside the attention emulation of gemm_args_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/optim/adamw.h"
#include "common/tensor/tensor.h"
#include "common/testing/max_or_nan.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {
namespace {

using Vec = std::vector<float>;

Vec rnd(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (float& x : v) x = u(g);
  return v;
}

// Bound: kernels/cpu evaluates tanh with Eigen's vectorised rational approximation, this header
// with libm's tanhf (on the GPU: CUDA's tanhf, 2 ulp); both are within a few ulp of tanh, so the
// results differ by a few ulp of values of order |x| (measured: 1.4e-7 and 6.4e-7): 2e-6·(1 + |x|).
TEST(SharedMath, GeluAndItsDerivativeMatchTheCpu) {
  const int n = 20000;
  const Vec x = rnd(n, 1, -8.0f, 8.0f), dy = rnd(n, 2);
  Vec y(n), dx(n);
  cpu::gelu_forward(y.data(), x.data(), n);
  cpu::gelu_backward(dx.data(), x.data(), dy.data(), n);
  float worst_y = 0.0f, worst_dx = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float s = 1.0f + std::fabs(x[i]);
    worst_y = testing::max_or_nan(worst_y, std::fabs(gelu(x[i]) - y[i]) / s);
    worst_dx = testing::max_or_nan(worst_dx, std::fabs(gelu_grad(x[i]) * dy[i] - dx[i]) / s);
  }
  std::printf("gelu: largest |diff|/(1+|x|) %.3g, gelu': %.3g\n", worst_y, worst_dx);
  EXPECT_LE(worst_y, 2e-6f);
  EXPECT_LE(worst_dx, 2e-6f);
}

// Rows of C = 37 channels offset by 3 (a mean far from 0); the sums here run in index order,
// Eigen's in vectorised blocks: ~C·2⁻²⁴ relative, bound 1e-5 relative on y, mean, rstd, dx.
TEST(SharedMath, LayerNormRowStepsMatchTheCpu) {
  const int N = 5, C = 37;
  const Vec x = rnd(N * C, 3, 2.0f, 4.0f), w = rnd(C, 4), b = rnd(C, 5), dy = rnd(N * C, 6);
  Vec y(N * C), mean(N), rstd(N), dx = rnd(N * C, 7), dx_ref = dx;
  cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  cpu::layernorm_backward(dx_ref.data(), nullptr, nullptr, dy.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  auto rel = [](float a, float r) { return std::fabs(a - r) / (1.0f + std::fabs(r)); };
  float worst = 0.0f;
  for (int n = 0; n < N; ++n) {
    const float* xr = x.data() + n * C;
    float s = 0.0f, sq = 0.0f;
    for (int c = 0; c < C; ++c) s += xr[c];
    const float m = ln_mean(s, C);
    for (int c = 0; c < C; ++c) sq += (xr[c] - m) * (xr[c] - m);
    const float r = ln_rstd(sq, C);
    worst = std::max({worst, rel(m, mean[n]), rel(r, rstd[n]) });
    float sd = 0.0f, sdx = 0.0f;
    for (int c = 0; c < C; ++c) {
      worst = std::max(worst, rel(ln_normalize(xr[c], m, r, w[c], b[c]), y[n * C + c]));
      const float dxhat = dy[n * C + c] * w[c];
      sd += dxhat;
      sdx += dxhat * (xr[c] - m) * r;
    }
    for (int c = 0; c < C; ++c) {
      const float got = dx[n * C + c] + ln_dx(dy[n * C + c] * w[c], (xr[c] - m) * r, sd / C,
                                              sdx / C, r);  // accumulated, as the kernel
      worst = std::max(worst, rel(got, dx_ref[n * C + c]));
    }
  }
  std::printf("layernorm: largest relative difference %.3g\n", worst);
  EXPECT_LE(worst, 1e-5f);
}

// One rank's shard of a vocabulary (v0 = 8, Vr = 24 of V = 40): targets inside and outside it.
// The row loss repeats the CPU's operations exactly (bit-identical). The gradient from
// softmax_exp and ce_grad: within 2⁻²² of the CPU's (the exp is libm's here and Eigen's
// vectorised one there, a few ulps apart; the scale and the target's subtraction are the same
// two operations).
TEST(SharedMath, CrossEntropyGradientAndLossMatchTheCpu) {
  const int N = 6, Vr = 24, v0 = 8;
  const std::vector<int32_t> y = {3, 8, 20, 31, 32, 39};  // 3 and 32, 39 are another rank's
  const Vec z0 = rnd(N * Vr, 8, -4.0f, 4.0f);
  Vec z = z0, m(N), sums(2 * N);
  cpu::cross_entropy_row_max(m.data(), z.data(), N, Vr);
  cpu::cross_entropy_exp_sums(sums.data(), z.data(), y.data(), v0, N, Vr, m.data());
  const float dloss = 1.0f / N;
  const double ref = cpu::cross_entropy_loss(z.data(), y.data(), v0, N, Vr, m.data(), sums.data(),
                                             dloss, true, DType::kF32);
  double total = 0.0;
  float worst = 0.0f;
  for (int n = 0; n < N; ++n) {
    total += ce_row_loss(m[n], sums[n], sums[N + n]);
    for (int v = 0; v < Vr; ++v) {
      const float e = softmax_exp(z0[n * Vr + v], m[n], 1.0f);
      const float g = ce_grad(e, dloss / sums[n], v == y[n] - v0, dloss);
      worst = testing::max_or_nan(worst, std::fabs(g - z[n * Vr + v]));
    }
  }
  std::printf("cross-entropy gradient: largest difference %.3g (dloss %.3g)\n", worst, dloss);
  EXPECT_LE(worst, dloss * 2.4e-7f);  // 2^-22 of dloss, the gradient's scale
  EXPECT_EQ(total, ref);
}

// run_containing (the AdamW kernels' run of an element, adamw.cu): for runs of 1..5 elements and
// every element, the binary search (no hint) and the forward walk from every earlier run agree
// with a linear scan.
TEST(SharedMath, RunContainingFindsEveryElementsRun) {
  std::mt19937 gen(3);
  std::uniform_int_distribution<int> len(1, 5);
  for (int count : {1, 2, 7, 64}) {
    std::vector<int64_t> end;
    int64_t e = 10;  // the first run starts at 10 (a later launch's runs)
    for (int k = 0; k < count; ++k) end.push_back(e += len(gen));
    int wrong = 0;
    for (int64_t i = 10; i < end.back(); ++i) {
      int k = 0;
      while (end[k] <= i) ++k;
      wrong += run_containing(end.data(), count, i, -1) != k;
      for (int hint = 0; hint <= k; ++hint)
        wrong += run_containing(end.data(), count, i, hint) != k;
    }
    EXPECT_EQ(wrong, 0) << count << " runs";
  }
}

// λ of element i by the definition: inside one of the decay ranges.
bool decayed(const std::vector<ElementRange>& decay, int64_t i) {
  for (const ElementRange& r : decay)
    if (r.begin <= i && i < r.end) return true;
  return false;
}

// AdamW: 3 steps on n = 13 elements, decay ranges [2,5) and [9,13), λ = 0.1, against
// AdamW::step. Same operations in the same order on the host: bit-identical (bound 0).
TEST(SharedMath, AdamWElementMatchesAdamWStep) {
  const int64_t n = 13;
  AdamWConfig cfg;
  cfg.lr = 3e-3f;
  cfg.weight_decay = 0.1f;
  const std::vector<ElementRange> decay = {{2, 5}, {9, 13}};
  AdamW opt(n, cfg, decay);
  Vec p_ref = rnd(n, 9), p = p_ref, m(n, 0.0f), v(n, 0.0f);
  for (int64_t t = 1; t <= 3; ++t) {
    const Vec g = rnd(n, 10 + t);
    opt.step(p_ref.data(), g.data(), t);
    const float c1 = adamw_bias_correction(cfg.beta1, t), c2 = adamw_bias_correction(cfg.beta2, t);
    for (int64_t i = 0; i < n; ++i)
      adamw_element(p[i], g[i], m[i], v[i], cfg.lr, cfg.beta1, cfg.beta2, c1, c2, cfg.eps,
                    decayed(decay, i) ? cfg.weight_decay : 0.0f);
  }
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(p[i], p_ref[i]) << "parameter " << i;
    EXPECT_EQ(m[i], opt.exp_avg().f32()[i]) << "m " << i;
    EXPECT_EQ(v[i], opt.exp_avg_sq().f32()[i]) << "v " << i;
  }
}

// Mixed precision: bf16 parameters, f16 gradients scaled by 1/8, 2 steps, against
// AdamW::step_mixed: master weights and the rounded bf16 parameters bit-identical.
TEST(SharedMath, AdamWMixedMatchesStepMixed) {
  const int64_t n = 9;
  AdamWConfig cfg;
  cfg.weight_decay = 0.05f;
  const std::vector<ElementRange> decay = {{0, 4}};
  AdamW opt(n, cfg, decay, DType::kBF16);
  const Vec init = rnd(n, 20);
  std::copy(init.begin(), init.end(), opt.master().f32());
  Tensor p16 = Tensor::empty({n}, DType::kBF16, MemCategory::kParameters);
  Tensor g16 = Tensor::empty({n}, DType::kF16, MemCategory::kGradients);
  Vec master = init, m(n, 0.0f), v(n, 0.0f);
  std::vector<uint16_t> p(n);
  for (int64_t t = 1; t <= 2; ++t) {
    cpu::round_to(rnd(n, 30 + t, -8.0f, 8.0f).data(), g16.raw(), DType::kF16, n);
    opt.step_mixed(p16, g16, 0.125f, t, n);
    const uint16_t* g = static_cast<const uint16_t*>(g16.raw());
    const float c1 = adamw_bias_correction(cfg.beta1, t), c2 = adamw_bias_correction(cfg.beta2, t);
    for (int64_t i = 0; i < n; ++i) {
      adamw_element(master[i], f32_from_f16(g[i]) * 0.125f, m[i], v[i], cfg.lr, cfg.beta1,
                    cfg.beta2, c1, c2, cfg.eps, decayed(decay, i) ? cfg.weight_decay : 0.0f);
      p[i] = bf16_from_f32(master[i]);
    }
  }
  const uint16_t* ref = static_cast<const uint16_t*>(p16.raw());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(master[i], opt.master().f32()[i]) << "master " << i;
    EXPECT_EQ(p[i], ref[i]) << "bf16 parameter " << i;
  }
}

bool is_nan16(uint16_t h, bool bf) {
  return bf ? (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) : (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu);
}

// Every f16 and bf16 bit pattern widens to the CPU's fp32 value (exact: bound 0, NaN as NaN).
TEST(SharedMath, WideningEvery16BitPatternMatchesTheCpu) {
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  for (DType t : {DType::kF16, DType::kBF16}) {
    Vec ref(65536);
    cpu::widen(all.data(), t, ref.data(), 65536);
    int64_t wrong = 0;
    for (int i = 0; i < 65536; ++i) {
      const float got = t == DType::kF16 ? f32_from_f16(all[i]) : f32_from_bf16(all[i]);
      const bool same = std::isnan(ref[i]) ? std::isnan(got) : f32_bits(got) == f32_bits(ref[i]);
      wrong += !same;
    }
    EXPECT_EQ(wrong, 0) << to_string(t);
  }
}

// Rounding to nearest even: 2²² random fp32 bit patterns (every exponent: normals, subnormals,
// inf, NaN) plus the edges (ties at 65520 and 2⁻²⁵, the largest finite f16, the smallest
// subnormal), against cpu::round_to (Eigen, F16C on x86). Exact: bound 0, NaN as NaN.
TEST(SharedMath, RoundingMatchesTheCpuBitForBit) {
  std::mt19937 gen(40);
  Vec x;
  for (int i = 0; i < (1 << 22); ++i) x.push_back(f32_from_bits(static_cast<uint32_t>(gen())));
  for (float e : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, -65520.0f, 2.98023224e-8f,
                  2.98023224e-8f * 1.0001f, 5.96046448e-8f, 8.94069672e-8f, 6.10351562e-5f,
                  6.1e-5f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 1.0f + 1.0f / 256,
                  1.0f + 3.0f / 256, 3.4e38f, INFINITY, -INFINITY, NAN})
    x.push_back(e);
  const int64_t n = static_cast<int64_t>(x.size());
  for (DType t : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> ref(n);
    cpu::round_to(x.data(), ref.data(), t, n);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool bf = t == DType::kBF16;
      const uint16_t got = bf ? bf16_from_f32(x[i]) : f16_from_f32(x[i]);
      const bool same = is_nan16(ref[i], bf) ? is_nan16(got, bf) : got == ref[i];
      if (!same && wrong++ < 5)
        ADD_FAILURE() << to_string(t) << " of " << x[i] << " (0x" << std::hex << f32_bits(x[i])
                      << "): got 0x" << got << ", cpu 0x" << ref[i];
    }
    EXPECT_EQ(wrong, 0) << to_string(t) << " of " << n << " values";
  }
}

// 16-bit gradient accumulation (reduce.cu's accumulate_kernel): round(widen(d) + s) with these
// conversions, against cpu::accumulate_to, bit for bit: random 16-bit d and fp32 s of mixed
// magnitudes (sums that cancel to 0, land in fp16's subnormals or overflow past 65504).
TEST(SharedMath, AccumulationMatchesTheCpuBitForBit) {
  std::mt19937 gen(41);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-30, 17);
  const int64_t n = 1 << 20;
  Vec d32(n), src(n);
  for (int64_t i = 0; i < n; ++i) {
    d32[i] = std::ldexp(u(gen), e(gen));
    src[i] = i % 7 == 0 ? -d32[i] : std::ldexp(u(gen), e(gen));
  }
  d32[0] = 65504.0f, src[0] = 16.0f;  // to inf in fp16
  for (DType t : {DType::kF16, DType::kBF16}) {
    const bool bf = t == DType::kBF16;
    std::vector<uint16_t> ref(n);
    cpu::round_to(d32.data(), ref.data(), t, n);
    std::vector<uint16_t> got = ref;
    cpu::accumulate_to(src.data(), ref.data(), t, n);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float x = (bf ? f32_from_bf16(got[i]) : f32_from_f16(got[i])) + src[i];
      got[i] = bf ? bf16_from_f32(x) : f16_from_f32(x);
      if (got[i] != ref[i] && wrong++ < 5)
        ADD_FAILURE() << to_string(t) << " at " << i << ": got 0x" << std::hex << got[i]
                      << ", cpu 0x" << ref[i];
    }
    EXPECT_EQ(wrong, 0) << to_string(t);
  }
}

// round16 (the softmax kernels' P and dS, cross-entropy's gradient) is cpu::round_trip, bit for
// bit, on every binade; kNone is the identity.
TEST(SharedMath, Round16IsTheCpuRoundTrip) {
  std::mt19937 gen(42);
  int64_t wrong = 0, changed = 0;
  for (int i = 0; i < (1 << 20); ++i) {
    const float x = f32_from_bits(static_cast<uint32_t>(gen()));
    if (std::isnan(x)) continue;
    for (const bool bf : {false, true}) {
      const Round16 r = bf ? Round16::kBF16 : Round16::kF16;
      const DType t = bf ? DType::kBF16 : DType::kF16;
      const float got = round16(x, r), want = cpu::round_trip(x, t);
      changed += got != x;
      if (f32_bits(got) != f32_bits(want) && wrong++ < 5)
        ADD_FAILURE() << to_string(t) << " of " << x << ": got " << got << ", cpu " << want;
    }
    if (f32_bits(round16(x, Round16::kNone)) != f32_bits(x)) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(changed, 1 << 19);  // the rounding did something on most random patterns
}

}  // namespace
}  // namespace cuda
}  // namespace llmp
