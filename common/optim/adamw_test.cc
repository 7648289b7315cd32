#include "common/optim/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/adamw.h"

namespace llmp {
namespace {

// Reference: Algorithm 2 of Loshchilov & Hutter, written out in double for two steps.
TEST(AdamW, MatchesTheAlgorithmForTwoSteps) {
  AdamWConfig cfg;
  cfg.lr = 0.1f;
  cfg.weight_decay = 0.01f;
  AdamW opt(2, cfg, {{0, 2}});
  std::vector<float> p = {1.0f, -2.0f};
  const std::vector<std::vector<float>> g = {{0.5f, -1.0f}, {0.25f, 3.0f}};
  std::vector<double> rp = {1.0, -2.0}, m(2, 0.0), v(2, 0.0);
  for (int t = 1; t <= 2; ++t) {
    opt.step(p.data(), g[t - 1].data(), t);
    for (int i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[t - 1][i];
      v[i] = 0.95 * v[i] + 0.05 * g[t - 1][i] * g[t - 1][i];
      const double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.95, t));
      rp[i] -= 0.1 * (mh / (std::sqrt(vh) + 1e-8) + 0.01 * rp[i]);
    }
  }
  EXPECT_NEAR(p[0], rp[0], 1e-6);
  EXPECT_NEAR(p[1], rp[1], 1e-6);
}

TEST(AdamW, GradScaleIsTheUpdateOfTheScaledGradients) {
  // --clip_grad's coefficient k rides in as grad_scale: the update from g with k must be the
  // update from k·g, bit for bit, in fp32 and through the mixed-precision path (k·1/S there),
  // and k = 1 must be the plain update. Over two steps with different k (Adam's m/√v is blind
  // to one constant factor, not to a factor that changes between steps).
  AdamWConfig cfg;
  cfg.lr = 0.05f;
  cfg.weight_decay = 0.01f;
  const int n = 9;
  std::vector<float> init(n), g1(n), g2(n);
  for (int i = 0; i < n; ++i) init[i] = 0.1f * i - 0.3f, g1[i] = 0.5f - 0.11f * i, g2[i] = 0.07f * i;
  const float k[2] = {0.375f, 0.8125f};  // exact products: k·g is what the update reads
  AdamW scaled(n, cfg, {{0, 5}}), prescaled(n, cfg, {{0, 5}}), plain(n, cfg, {{0, 5}});
  std::vector<float> p_scaled = init, p_pre = init, p_plain = init, p_one = init;
  AdamW one(n, cfg, {{0, 5}});
  for (int t = 1; t <= 2; ++t) {
    const std::vector<float>& g = t == 1 ? g1 : g2;
    std::vector<float> kg(n);
    for (int i = 0; i < n; ++i) kg[i] = g[i] * k[t - 1];
    scaled.step(p_scaled.data(), g.data(), t, -1, k[t - 1]);
    prescaled.step(p_pre.data(), kg.data(), t);
    plain.step(p_plain.data(), g.data(), t);
    one.step(p_one.data(), g.data(), t, -1, 1.0f);
  }
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(p_scaled[i], p_pre[i]) << i;
    EXPECT_EQ(p_one[i], p_plain[i]) << i;
  }
  EXPECT_NE(p_scaled, p_plain) << "the scale must change the update";
  for (int i = 0; i < n; ++i) EXPECT_EQ(scaled.exp_avg().f32()[i], prescaled.exp_avg().f32()[i]);

  // Mixed precision: bf16 parameters, fp32 gradients times 1/S·k against fp32 gradients k·g/S.
  AdamW mixed(n, cfg, {{0, 5}}, DType::kBF16), mixed_pre(n, cfg, {{0, 5}}, DType::kBF16);
  Tensor p16 = Tensor::empty({n}, DType::kBF16, MemCategory::kParameters);
  Tensor q16 = Tensor::empty({n}, DType::kBF16, MemCategory::kParameters);
  for (int i = 0; i < n; ++i) mixed.master().f32()[i] = mixed_pre.master().f32()[i] = init[i];
  Tensor g = Tensor::empty({n}), kg = Tensor::empty({n});
  for (int i = 0; i < n; ++i) g.f32()[i] = 8.0f * g1[i], kg.f32()[i] = 8.0f * g1[i] * k[0];
  mixed.step_mixed(p16, g, 0.125f * k[0], 1);
  mixed_pre.step_mixed(q16, kg, 0.125f, 1);
  for (int i = 0; i < n; ++i) EXPECT_EQ(mixed.master().f32()[i], mixed_pre.master().f32()[i]) << i;
}

TEST(AdamW, ShardUpdateEqualsSliceOfWholeUpdate) {
  // The property ZeRO relies on: updating [a, b) alone gives the same numbers as updating all.
  AdamWConfig cfg;
  std::vector<float> whole(10), shard, grads(10);
  for (int i = 0; i < 10; ++i) whole[i] = 0.1f * i, grads[i] = 0.3f - 0.07f * i;
  shard.assign(whole.begin() + 4, whole.begin() + 7);
  AdamW all(10, cfg, {{0, 10}}), part(3, cfg, {{0, 3}});
  for (int t = 1; t <= 3; ++t) {
    all.step(whole.data(), grads.data(), t);
    part.step(shard.data(), grads.data() + 4, t);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(shard[i], whole[4 + i]);
}

// The split into runs of constant λ (one kernel call per run, on every device) gives each element
// the λ of the definition: λ inside a decay range, 0 outside. Random sorted, disjoint, possibly
// empty or adjacent ranges and a random valid prefix n (ZeRO's padded last shard), against the
// element update called one element at a time with that element's λ.
TEST(AdamW, DecayRunsGiveEachElementItsDecay) {
  std::mt19937 gen(5);
  AdamWConfig cfg;
  cfg.lr = 0.05f;
  cfg.weight_decay = 0.5f;  // large: a wrong λ moves a parameter well past rounding
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t size = 1 + gen() % 60;
    std::vector<ElementRange> decay;
    for (int64_t at = 0; at < size;) {
      const int64_t b = at + gen() % 5, e = b + gen() % 8;
      if (e > size) break;
      decay.push_back({b, e});
      at = e;
    }
    const int64_t n = gen() % (size + 1);
    AdamW opt(size, cfg, decay);
    std::vector<float> p(size), g(size), ref, m(size, 0.0f), v(size, 0.0f);
    for (int64_t i = 0; i < size; ++i) p[i] = 1.0f + 0.01f * i, g[i] = 0.2f - 0.013f * i;
    ref = p;
    opt.step(p.data(), g.data(), 1, n);
    const float c1 = 1.0f / (1.0f - cfg.beta1), c2 = 1.0f / (1.0f - cfg.beta2);
    for (int64_t i = 0; i < n; ++i) {
      bool in = false;
      for (const ElementRange& r : decay) in |= r.begin <= i && i < r.end;
      cpu::adamw_update(&ref[i], &g[i], &m[i], &v[i], 1, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps,
                        in ? cfg.weight_decay : 0.0f, c1, c2);
    }
    for (int64_t i = 0; i < size; ++i)  // past n: untouched
      ASSERT_EQ(p[i], ref[i]) << "trial " << trial << " element " << i << " of " << n;
  }
}

TEST(AdamW, StateIsCountedAsOptimizerState) {
  auto& mt = MemoryTracker::instance();
  const int64_t before = mt.current(MemCategory::kOptimizerState);
  {
    AdamW opt(1000, AdamWConfig{}, {{0, 1000}});
    EXPECT_EQ(mt.current(MemCategory::kOptimizerState) - before, 8000);  // K = 8 bytes/element
  }
  EXPECT_EQ(mt.current(MemCategory::kOptimizerState), before);
}

}  // namespace
}  // namespace llmp
