// Lab zero_sharded_step: the tests. They reach the code only through zero_sharded_step.h, so
// this one file checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/zero_sharded_step:student_test).
//
// Every rank can draw every rank's gradient (a seed per step and rank), so each rank also runs
// the dense step it must equal: AdamW over all Ψ parameters with the mean of the N gradients,
// averaged in double. What is checked:
//  - zero_shard against hand-worked shards: padding at N = 3 and 4, a shard of padding only, N = 1;
//  - after each of 3 steps, every rank's parameters equal the dense AdamW's within kTol (the
//    reduce_scatter sums in float in MPI's order, the dense mean in double: observed ~1e-8),
//    and this rank's m and v (its shard's optimizer state) equal the dense state's slice, zero on
//    the padding;
//  - nothing past the Ψ parameters is written (they are a view of a longer buffer);
//  - traffic per step: one reduce_scatter and one all_gather, each (N-1)/N·4Ψp bytes, no other
//    call (an all_reduce of the gradient gives the right parameters and fails here);
//  - Ψ = 1001 (padding 1 at N = 2 and 3, 3 at N = 4), Ψ = 5 (at N = 4 the last shard is all
//    padding), and a group cut from the world with its ranks reversed (group rank != world rank).
//
// Glossary: Ψ parameters, N ranks, r this rank, Ψp padded size, k shard size, t step.
#include "labs/zero_sharded_step/zero_sharded_step.h"
#include "common/testing/max_or_nan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

namespace llmp {
namespace {

constexpr double kTol = 1e-6;
constexpr int kSteps = 3;
constexpr int kSentinels = 8;
constexpr float kSentinel = 123.0f;

AdamWConfig config() {
  AdamWConfig c;
  c.lr = 1e-2f, c.weight_decay = 0.1f;  // decay on every element: the lab shards, not masks
  return c;
}

std::vector<float> draw(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& e : v) e = u(gen);
  return v;
}

// Rank r's gradient at step t (every rank can make every rank's).
std::vector<float> gradient(int64_t psi, int t, int r) { return draw(psi, 1000 * t + r + 7); }

Tensor host(const std::vector<float>& v) {
  Tensor x = Tensor::empty({int64_t(v.size())}, DType::kF32, MemCategory::kParameters);
  std::copy(v.begin(), v.end(), x.f32());
  return x;
}

// kSteps steps of zero_step on `dp` against the dense AdamW, parameters and state after each.
void check_steps(ProcessGroup& dp, int64_t psi) {
  const int N = dp.size(), r = dp.rank();
  const ZeroShard s = zero_shard(psi, N, r);
  std::vector<float> init = draw(psi, 1);
  // params is a view of the first Ψ elements of a longer buffer whose tail holds a sentinel: an
  // update of the whole padded shard (AdamW's n = k, not count) writes past Ψ and changes it.
  std::vector<float> backing_values = init;
  backing_values.resize(psi + kSentinels, kSentinel);
  Tensor backing = host(backing_values);
  Tensor params = backing.narrow(0, psi);
  AdamW opt(s.size, config(), {{0, s.size}});
  std::vector<float> dense = init;  // the dense step, on one rank's worth of everything
  AdamW dense_opt(psi, config(), {{0, psi}});
  double worst = 0;
  for (int t = 1; t <= kSteps; ++t) {
    std::vector<double> sum(psi, 0.0);
    for (int q = 0; q < N; ++q) {
      const std::vector<float> g = gradient(psi, t, q);
      for (int64_t i = 0; i < psi; ++i) sum[i] += g[i];
    }
    std::vector<float> mean(psi);
    for (int64_t i = 0; i < psi; ++i) mean[i] = static_cast<float>(sum[i] / N);
    dense_opt.step(dense.data(), mean.data(), t);

    const Tensor grads = host(gradient(psi, t, r));
    dp.reset_stats();
    zero_step(dp, params, grads, opt, t);

    // The traffic of this step: one reduce_scatter and one all_gather of Ψp floats.
    const double each = double(N - 1) / N * 4.0 * s.padded;
    const std::string ops = dp.stats().calls_str();
    EXPECT_EQ(dp.stats().bytes_of("reduce_scatter"), each) << "step " << t << ", calls:" << ops;
    EXPECT_EQ(dp.stats().bytes_of("all_gather"), each) << "step " << t << ", calls:" << ops;
    EXPECT_EQ(dp.stats().total_bytes(), 2 * each)
        << "step " << t << ": only the reduce_scatter and the all_gather; calls:" << ops;
    if (N > 1) {
      EXPECT_EQ(dp.stats().calls.count("all_reduce"), 0u) << "ZeRO reduce-scatters instead";
      EXPECT_EQ(dp.stats().calls_of("reduce_scatter"), 1) << "calls:" << ops;
      EXPECT_EQ(dp.stats().calls_of("all_gather"), 1) << "calls:" << ops;
    }

    // Every parameter, on every rank.
    int64_t off = 0;
    for (int64_t i = 0; i < psi; ++i) {
      const double d = std::abs(double(params.f32()[i]) - dense[i]);
      worst = testing::max_or_nan(worst, d);
      if (!(d <= kTol) && off++ < 3)
        ADD_FAILURE() << "step " << t << ", rank " << r << " of " << N << ", Ψ " << psi
                      << ": parameter " << i << " is " << params.f32()[i] << ", the dense AdamW's "
                      << dense[i] << (i >= s.begin && i < s.begin + s.count ? " (this rank's shard)"
                                                                            : " (another shard)");
    }
    EXPECT_EQ(off, 0) << "step " << t << ": parameters that differ";
    // EXPECT, not ASSERT: a rank that left the test early would leave the others waiting in
    // the next step's collectives.
    for (int64_t i = psi; i < psi + kSentinels; ++i)
      if (backing.f32()[i] != kSentinel) {
        ADD_FAILURE() << "step " << t << ", rank " << r << ": element " << i << " past the Ψ = "
                      << psi << " parameters was written (the padding is not a parameter: "
                      << "update `count` elements)";
        break;
      }
    // This rank's m and v: the dense optimizer's over [begin, begin + count), zero on padding.
    for (int64_t i = 0; i < s.size; ++i) {
      const bool valid = i < s.count;
      const float m = opt.exp_avg().f32()[i], v = opt.exp_avg_sq().f32()[i];
      const float dm = valid ? dense_opt.exp_avg().f32()[s.begin + i] : 0.f;
      const float dv = valid ? dense_opt.exp_avg_sq().f32()[s.begin + i] : 0.f;
      if (!(std::abs(m - dm) <= kTol) || !(std::abs(v - dv) <= kTol)) {  // a NaN too
        ADD_FAILURE() << "step " << t << ", rank " << r << ": optimizer state at shard element "
                      << i << (valid ? "" : " (padding)") << " is m " << m << ", v " << v
                      << "; the dense AdamW's " << dm << ", " << dv;
        break;
      }
    }
  }
  if (r == 0)
    std::printf("N=%d, Ψ=%lld (Ψp %lld): %d steps equal the dense AdamW, largest difference "
                "%.1e (bound %g)\n",
                N, static_cast<long long>(psi), static_cast<long long>(s.padded), kSteps, worst,
                kTol);
}

TEST(ZeroShard, PadsToEqualShards) {
  struct Case {
    int64_t psi;
    int n, r;
    ZeroShard want;  // padded, size, begin, count
  };
  const Case cases[] = {
      {10, 4, 3, {12, 3, 9, 1}},        // the last shard: one parameter, two padding
      {10, 4, 1, {12, 3, 3, 3}},
      {5, 4, 3, {8, 2, 6, 0}},          // a shard of padding only
      {1001, 3, 2, {1002, 334, 668, 333}},
      {12, 4, 2, {12, 3, 6, 3}},        // no padding
      {7, 1, 0, {7, 7, 0, 7}},          // one rank: everything
  };
  for (const Case& c : cases) {
    const ZeroShard s = zero_shard(c.psi, c.n, c.r);
    EXPECT_TRUE(s.padded == c.want.padded && s.size == c.want.size && s.begin == c.want.begin &&
                s.count == c.want.count)
        << "zero_shard(psi " << c.psi << ", n " << c.n << ", r " << c.r << ") = {padded "
        << s.padded << ", size " << s.size << ", begin " << s.begin << ", count " << s.count
        << "}, want {" << c.want.padded << ", " << c.want.size << ", " << c.want.begin << ", "
        << c.want.count << "}";
  }
}

TEST(ZeroStep, EqualsTheDenseAdamWWithTheMeanGradient) {
  auto dp = ProcessGroup::world();
  check_steps(*dp, 1001);
}

TEST(ZeroStep, AShardOfPaddingOnly) {
  auto dp = ProcessGroup::world();
  check_steps(*dp, 5);  // N = 4: rank 3 holds elements 6, 7 of Ψp = 8, none a parameter
}

TEST(ZeroStep, OnAGroupWhoseRanksAreNotTheWorlds) {
  auto world = ProcessGroup::world();
  auto dp = world->split(0, world->size() - 1 - world->rank());  // ranks reversed
  check_steps(*dp, 37);
}

}  // namespace
}  // namespace llmp
