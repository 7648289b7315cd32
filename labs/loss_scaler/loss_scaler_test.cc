// Lab loss_scaler: the tests. They reach the code only through loss_scaler.h, so this one file
// checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/loss_scaler:student_test).
//
// What is checked, and why each expected value holds:
//  - the gradients: g_r[i] = m·2^-26 with m a small integer in [-3, 3] depending on the rank, the
//    element and the step. In f16 they underflow (fp16's smallest subnormal is 2^-24; checked by
//    the first test), which is why the loss is scaled. The shard holds S·g with S = 2^k, k ≥ 10:
//    m·2^(k-26) is a multiple of 2^-24 below 2^11, so f16 holds it exactly, and float(S·g)/S = g
//    exactly: the unscaled gradients are compared with ==, element by element;
//  - an overflow is put on ONE rank only (an inf, a -inf or a nan in its shard: under ZeRO a rank
//    sees only its shard). Every rank must skip that step and back off: a rank that decides from
//    its own shard alone applies the step while the overflowing rank skips it. Each rank checks
//    its own answer against the same expected value, so any disagreement fails on some rank;
//  - on a skipped step grads32 must stay as it was (filled with a sentinel beforehand);
//  - a step sequence with W = 3 against a table of S written out by hand, so growing one step
//    early (at W-1 clean steps), not resetting the count on an overflow or not backing off fails;
//  - min_scale, non-default factors, uneven shards (rank 0's empty), views of larger buffers.
// A rank that waits in a collective the others never make (an agreement issued only on some
// ranks) ends the test after 60 s through the ProcessGroup's watchdog, naming the operation.
//
// Glossary: N ranks, r this rank, q the rank that overflows, S = state.scale, W growth interval.
#include "labs/loss_scaler/loss_scaler.h"

#include <gtest/gtest.h>

#include <Eigen/Core>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace llmp {
namespace {

constexpr float kSentinel = -12345.0f;  // what grads32 holds before a step

std::shared_ptr<ProcessGroup> world() {
  set_comm_timeout(60);  // a collective made on some ranks only: a failure, not a hang
  return ProcessGroup::world();
}

// The test gradient g_r[i] at `step`: m·2^-26, m in [-3, 3].
float g_of(int r, int64_t i, int step) {
  const int m = static_cast<int>((r * 7 + i * 3 + step * 5) % 7) - 3;
  return std::ldexp(static_cast<float>(m), -26);
}

enum class Bad { kNone, kInf, kMinusInf, kNan };

// This rank's shard for one step: n f16 elements holding S·g, the last one made non-finite
// when `bad` says so (as an overflowing product would be).
Tensor shard16(int r, int64_t n, int step, float S, Bad bad) {
  Tensor t = Tensor::empty({n}, DType::kF16);
  for (int64_t i = 0; i < n; ++i) t.data<Eigen::half>()[i] = Eigen::half(S * g_of(r, i, step));
  const float v = bad == Bad::kInf ? INFINITY : bad == Bad::kMinusInf ? -INFINITY : NAN;
  if (bad != Bad::kNone && n > 0) t.data<Eigen::half>()[n - 1] = Eigen::half(v);
  return t;
}

Tensor sentinel32(int64_t n) {
  Tensor t = Tensor::empty({n});
  t.fill(kSentinel);
  return t;
}

// "" when every t[i] == want(i), else how many differ and the first three.
template <typename F>
std::string wrong(const Tensor& t, F want) {
  int64_t bad = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.f32()[i] == want(i)) continue;
    if (++bad <= 3)
      first << "\n    element " << i << " = " << t.f32()[i] << ", expected " << want(i);
  }
  return bad ? std::to_string(bad) + " of " + std::to_string(t.numel()) + " wrong" + first.str()
             : "";
}

TEST(LossScalerLab, TheTestGradientsUnderflowInF16WithoutTheScale) {
  int lost = 0;
  for (int64_t i = 0; i < 7; ++i) {
    const float g = g_of(0, i, 0);
    if (g != 0.0f && static_cast<float>(Eigen::half(g)) != g) ++lost;
    EXPECT_EQ(static_cast<float>(Eigen::half(1024.0f * g)), 1024.0f * g) << "S·g is exact";
  }
  EXPECT_EQ(lost, 6) << "every nonzero g should be lost (rounded) in f16 without scaling";
}

TEST(LossScalerLab, CleanStepUnscalesExactlyIntoF32) {
  auto g = world();
  const int r = g->rank();
  const int64_t n = 37;
  ScalerState st;
  st.scale = 1024.0f;
  Tensor g16 = shard16(r, n, 1, st.scale, Bad::kNone);
  Tensor g32 = sentinel32(n);
  const bool applied = loss_scaler_step(*g, g16, g32, st, ScalerConfig{});
  EXPECT_TRUE(applied);
  EXPECT_EQ(wrong(g32, [&](int64_t i) { return g_of(r, i, 1); }), "")
      << "grads32 must be float(grads16) / S";
  EXPECT_EQ(st.scale, 1024.0f);
  EXPECT_EQ(st.clean_in_a_row, 1);
  EXPECT_EQ(st.skipped, 0);
}

TEST(LossScalerLab, OneRankAloneOverflowsAndEveryRankSkips) {
  auto g = world();
  const int N = g->size(), r = g->rank();
  const int64_t n = 16;
  for (int q = 0; q < N; ++q) {
    for (Bad bad : {Bad::kInf, Bad::kMinusInf, Bad::kNan}) {
      ScalerState st;
      st.scale = 1024.0f;
      st.clean_in_a_row = 5;
      st.skipped = 2;
      Tensor g16 = shard16(r, n, 2, st.scale, r == q ? bad : Bad::kNone);
      Tensor g32 = sentinel32(n);
      const bool applied = loss_scaler_step(*g, g16, g32, st, ScalerConfig{});
      const char* what = bad == Bad::kInf ? "inf" : bad == Bad::kMinusInf ? "-inf" : "nan";
      const std::string where = "rank " + std::to_string(q) + " alone saw " + what +
                                "; this is rank " + std::to_string(r);
      EXPECT_FALSE(applied) << where << ": every rank must skip (agree over the group)";
      EXPECT_EQ(st.scale, 512.0f) << where << ": S must halve on every rank";
      EXPECT_EQ(st.clean_in_a_row, 0) << where;
      EXPECT_EQ(st.skipped, 3) << where;
      EXPECT_EQ(wrong(g32, [](int64_t) { return kSentinel; }), "")
          << where << ": grads32 must be left untouched on a skipped step";
    }
  }
}

TEST(LossScalerLab, AStepSequenceGrowsAfterExactlyTheWindow) {
  auto g = world();
  const int N = g->size(), r = g->rank();
  ScalerConfig cfg;
  cfg.growth_interval = 3;
  ScalerState st;
  st.scale = 4096.0f;
  // Step 5 overflows on the last rank only. By the rule, with W = 3 and S0 = 2^12:
  //   steps 1, 2 clean; 3 clean → grow to 8192; 4 clean; 5 overflow → skip, back to 4096;
  //   6, 7 clean; 8 clean → grow to 8192; 9 clean.
  const std::vector<int> want_applied = {1, 1, 1, 1, 0, 1, 1, 1, 1};
  const std::vector<float> want_scale = {4096, 4096, 8192, 8192, 4096, 4096, 4096, 8192, 8192};
  const std::vector<int> want_clean = {1, 2, 0, 1, 0, 1, 2, 0, 1};
  std::vector<int> applied;
  std::vector<float> scale;
  std::vector<int> clean;
  std::vector<std::string> grads;
  const int64_t n = 5 + r;
  for (int step = 1; step <= 9; ++step) {
    const float S = st.scale;
    Tensor g16 = shard16(r, n, step, S, step == 5 && r == N - 1 ? Bad::kInf : Bad::kNone);
    Tensor g32 = sentinel32(n);
    applied.push_back(loss_scaler_step(*g, g16, g32, st, cfg));
    scale.push_back(st.scale);
    clean.push_back(static_cast<int>(st.clean_in_a_row));
    grads.push_back(step == 5 ? wrong(g32, [](int64_t) { return kSentinel; })
                              : wrong(g32, [&](int64_t i) { return g_of(r, i, step); }));
  }
  EXPECT_EQ(applied, want_applied) << "which steps were applied (1) or skipped (0)";
  EXPECT_EQ(scale, want_scale) << "S after each step";
  EXPECT_EQ(clean, want_clean) << "clean_in_a_row after each step";
  EXPECT_EQ(st.skipped, 1);
  for (int step = 1; step <= 9; ++step)
    EXPECT_EQ(grads[step - 1], "") << "grads32 after step " << step << " (S before it "
                                   << (step == 1 ? 4096.0f : scale[step - 2]) << ")";
}

TEST(LossScalerLab, BackoffStopsAtMinScaleAndTheFactorsAreUsed) {
  auto g = world();
  const int N = g->size(), r = g->rank();
  ScalerConfig cfg;
  cfg.growth_factor = 4.0f;
  cfg.backoff_factor = 0.25f;
  cfg.growth_interval = 1;
  cfg.min_scale = 2.0f;
  ScalerState st;
  st.scale = 64.0f;
  // Overflows on rank (step mod N): 64 → 16 → 4 → max(1, 2) = 2; then clean: 2 → 8 (W = 1).
  std::vector<float> scale;
  for (int step = 0; step < 4; ++step) {
    Tensor g16 = shard16(r, 4, step, st.scale, step < 3 && r == step % N ? Bad::kNan : Bad::kNone);
    Tensor g32 = sentinel32(4);
    loss_scaler_step(*g, g16, g32, st, cfg);
    scale.push_back(st.scale);
  }
  EXPECT_EQ(scale, (std::vector<float>{16, 4, 2, 8}));
  EXPECT_EQ(st.skipped, 3);
}

TEST(LossScalerLab, UnevenShardsAnEmptyOneIncluded) {
  auto g = world();
  const int N = g->size(), r = g->rank();
  const int64_t n = 3 * r;  // rank 0 holds nothing, yet takes part in the agreement
  ScalerState st;
  st.scale = 2048.0f;
  Tensor g32 = sentinel32(n);
  const bool clean = loss_scaler_step(*g, shard16(r, n, 1, 2048.0f, Bad::kNone), g32, st,
                                      ScalerConfig{});
  const std::string grads = wrong(g32, [&](int64_t i) { return g_of(r, i, 1); });
  // Step 2: the last rank overflows (at N = 1 it is rank 0, which holds nothing: a clean step).
  Tensor h32 = sentinel32(n);
  const bool second = loss_scaler_step(
      *g, shard16(r, n, 2, 2048.0f, r == N - 1 ? Bad::kInf : Bad::kNone), h32, st, ScalerConfig{});
  EXPECT_TRUE(clean);
  EXPECT_EQ(grads, "");
  EXPECT_EQ(second, N == 1);
  EXPECT_EQ(st.scale, N == 1 ? 2048.0f : 1024.0f);
  EXPECT_EQ(st.skipped, N == 1 ? 0 : 1);
}

TEST(LossScalerLab, ViewsReadAndWriteOnlyTheirOwnElements) {
  auto g = world();
  const int r = g->rank();
  // grads16 = elements [2, 10) of a buffer whose elements 0 and 11 are inf (outside the view).
  Tensor big16 = shard16(r, 12, 3, 1024.0f, Bad::kInf);
  big16.data<Eigen::half>()[0] = Eigen::half(INFINITY);
  Tensor big32 = sentinel32(12);
  Tensor g32 = big32.narrow(2, 8);
  ScalerState st;
  st.scale = 1024.0f;
  const bool applied = loss_scaler_step(*g, big16.narrow(2, 8), g32, st, ScalerConfig{});
  EXPECT_TRUE(applied) << "an inf outside the view was counted";
  EXPECT_EQ(wrong(big32, [&](int64_t i) { return i < 2 || i >= 10 ? kSentinel : g_of(r, i, 3); }),
            "")
      << "elements 2..9 unscaled, the others untouched";
}

}  // namespace
}  // namespace llmp
