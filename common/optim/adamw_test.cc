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
