// Tests of the loss scaler (loss_scaler.h), run at 1..4 ranks (mpi_test). The update rule and the
// inf/nan check are local and run on every rank alike; OverflowAgreement is the collective.
//
// Expected values are written out as literals from the rule (Megatron's DynamicGradScaler without
// hysteresis): S = 2^k, so S·backoff and S·growth are exact and compared with ==.
//
// Glossary: S loss scale, W growth_interval, N ranks, q the one rank that sees an inf.
#include "common/optim/loss_scaler.h"

#include <gtest/gtest.h>

#include <Eigen/Core>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace llmp {
namespace {

LossScalerConfig dyn(float scale, int window) {
  LossScalerConfig c;
  c.scale = scale;
  c.growth_interval = window;
  return c;
}

TEST(LossScaler, DefaultsAreMegatronsAndDeepSpeeds) {
  LossScaler s{LossScalerConfig{}};
  EXPECT_TRUE(s.config().dynamic);
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.inv_scale(), 1.0f / 65536.0f);
  EXPECT_EQ(s.config().growth_factor, 2.0f);
  EXPECT_EQ(s.config().backoff_factor, 0.5f);
  EXPECT_EQ(s.config().growth_interval, 1000);
  EXPECT_EQ(s.config().min_scale, 1.0f);
  EXPECT_EQ(s.skipped_steps(), 0);
  EXPECT_EQ(s.clean_steps_in_a_row(), 0);
}

TEST(LossScaler, OverflowSkipsTheStepAndBacksOff) {
  LossScaler s(dyn(1024.0f, 5));
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.inv_scale(), 1.0f / 512.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 256.0f);
  EXPECT_EQ(s.skipped_steps(), 2);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 256.0f);
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(LossScaler, GrowsAfterExactlyGrowthIntervalCleanSteps) {
  LossScaler s(dyn(1024.0f, 4));
  // Steps 1..3 clean: no growth yet (a scaler growing one step early fails at step 3).
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(s.update(false)) << "step " << i;
    EXPECT_EQ(s.scale(), 1024.0f) << "grew after only " << i << " clean steps of 4";
    EXPECT_EQ(s.clean_steps_in_a_row(), i);
  }
  EXPECT_TRUE(s.update(false));  // the 4th clean step: S doubles, the counter restarts
  EXPECT_EQ(s.scale(), 2048.0f);
  EXPECT_EQ(s.clean_steps_in_a_row(), 0);
  for (int i = 1; i <= 3; ++i) {
    s.update(false);
    EXPECT_EQ(s.scale(), 2048.0f) << "grew after only " << i << " clean steps of 4";
  }
  s.update(false);
  EXPECT_EQ(s.scale(), 4096.0f);
  EXPECT_EQ(s.skipped_steps(), 0);
}

TEST(LossScaler, GrowthIntervalOfOneGrowsEveryCleanStep) {
  LossScaler s(dyn(1.0f, 1));
  s.update(false);
  EXPECT_EQ(s.scale(), 2.0f);
  s.update(false);
  EXPECT_EQ(s.scale(), 4.0f);
}

TEST(LossScaler, AnOverflowRestartsTheWindow) {
  LossScaler s(dyn(1024.0f, 3));
  s.update(false);
  s.update(false);  // 2 of 3 clean
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.clean_steps_in_a_row(), 0);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 512.0f) << "the clean steps before the overflow counted towards growth";
  s.update(false);
  EXPECT_EQ(s.scale(), 1024.0f);
}

TEST(LossScaler, NeverBacksOffBelowMinScale) {
  LossScalerConfig c = dyn(4.0f, 10);
  c.min_scale = 2.0f;
  LossScaler s(c);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 2.0f);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 2.0f) << "went below min_scale";
  EXPECT_EQ(s.skipped_steps(), 2);
  c.min_scale = 3.0f;  // S·backoff = 2 < 3: clamped to 3
  LossScaler t(c);
  t.update(true);
  EXPECT_EQ(t.scale(), 3.0f);
}

TEST(LossScaler, NonDefaultFactorsAreUsed) {
  LossScalerConfig c = dyn(256.0f, 2);
  c.growth_factor = 4.0f;
  c.backoff_factor = 0.25f;
  LossScaler s(c);
  s.update(true);
  EXPECT_EQ(s.scale(), 64.0f);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 256.0f);
}

TEST(LossScaler, StaticScaleNeverChangesButStillSkips) {
  LossScalerConfig c = dyn(128.0f, 1);
  c.dynamic = false;
  LossScaler s(c);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 128.0f);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 128.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(s.clean_steps_in_a_row(), 0);
}

TEST(LossScaler, StaticScaleMayBeBelowMinScale) {
  LossScalerConfig c = dyn(0.5f, 1);
  c.dynamic = false;
  EXPECT_EQ(LossScaler(c).scale(), 0.5f);
}

TEST(LossScaler, GrowthStopsAtTheLargestFiniteScale) {
  LossScaler s(dyn(std::ldexp(1.0f, 127), 1));
  s.update(false);
  EXPECT_EQ(s.scale(), std::ldexp(1.0f, 127)) << "2^128 is inf in f32";
}

TEST(LossScaler, SetStateRestoresScaleAndCounters) {
  LossScaler s(dyn(65536.0f, 4));
  s.set_state(512.0f, 3, 7);
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.clean_steps_in_a_row(), 3);
  EXPECT_EQ(s.skipped_steps(), 7);
  s.update(false);  // the restored counter's 4th clean step
  EXPECT_EQ(s.scale(), 1024.0f);
  s.update(true);
  EXPECT_EQ(s.skipped_steps(), 8);
}

// The message of the std::invalid_argument `f` throws ("" when it throws none).
std::string thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(LossScaler, BadValuesAreRefusedNamingTheValue) {
  struct Case {
    std::function<void(LossScalerConfig&)> edit;
    std::string field, value;
  };
  const std::vector<Case> cases = {
      {[](LossScalerConfig& c) { c.scale = 0.0f; }, "scale", "0"},
      {[](LossScalerConfig& c) { c.scale = -8.0f; }, "scale", "-8"},
      {[](LossScalerConfig& c) { c.scale = INFINITY; }, "scale", "inf"},
      {[](LossScalerConfig& c) { c.scale = NAN; }, "scale", "nan"},
      {[](LossScalerConfig& c) { c.min_scale = 0.0f; }, "min_scale", "0"},
      {[](LossScalerConfig& c) { c.growth_factor = 1.0f; }, "growth_factor", "1"},
      {[](LossScalerConfig& c) { c.growth_factor = 0.5f; }, "growth_factor", "0.5"},
      {[](LossScalerConfig& c) { c.backoff_factor = 1.0f; }, "backoff_factor", "1"},
      {[](LossScalerConfig& c) { c.backoff_factor = 0.0f; }, "backoff_factor", "0"},
      {[](LossScalerConfig& c) { c.backoff_factor = 2.0f; }, "backoff_factor", "2"},
      {[](LossScalerConfig& c) { c.growth_interval = 0; }, "growth_interval", "0"},
      {[](LossScalerConfig& c) { c.growth_interval = -3; }, "growth_interval", "-3"},
      {[](LossScalerConfig& c) { c.scale = 0.25f; }, "min_scale", "0.25"},  // dynamic, S < min
  };
  for (const Case& k : cases) {
    LossScalerConfig c;
    k.edit(c);
    const std::string msg = thrown([&] { LossScaler s(c); });
    EXPECT_NE(msg.find(k.field), std::string::npos) << "message: '" << msg << "'";
    EXPECT_NE(msg.find(k.value), std::string::npos) << "message: '" << msg << "'";
  }
  LossScaler s{LossScalerConfig{}};
  EXPECT_NE(thrown([&] { s.set_state(0.0f, 0, 0); }).find("scale 0"), std::string::npos);
  EXPECT_NE(thrown([&] { s.set_state(2.0f, -1, 0); }).find("-1"), std::string::npos);
  EXPECT_NE(thrown([&] { s.set_state(2.0f, 0, -2); }).find("-2"), std::string::npos);
  EXPECT_EQ(s.scale(), 65536.0f) << "a refused set_state changed the state";
}

// --- has_nonfinite ---

// A host tensor of dtype d holding `values` (rounded to d; f16/bf16 via Eigen's conversions).
Tensor filled(DType d, const std::vector<float>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, d);
  for (size_t i = 0; i < values.size(); ++i) {
    if (d == DType::kF32) t.data<float>()[i] = values[i];
    if (d == DType::kF16) t.data<Eigen::half>()[i] = Eigen::half(values[i]);
    if (d == DType::kBF16) t.data<Eigen::bfloat16>()[i] = Eigen::bfloat16(values[i]);
  }
  return t;
}

TEST(HasNonfinite, FindsInfMinusInfAndNanAnywhereInEveryDtype) {
  const float bad[] = {INFINITY, -INFINITY, NAN};
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<float> v = {1.0f, -2.0f, 0.0f, 3e-5f, 0.5f, -0.25f, 7.0f};
    EXPECT_FALSE(has_nonfinite(filled(d, v))) << to_string(d);
    for (float b : bad) {
      for (size_t at : {size_t{0}, v.size() / 2, v.size() - 1}) {  // first, middle, last
        std::vector<float> w = v;
        w[at] = b;
        EXPECT_TRUE(has_nonfinite(filled(d, w)))
            << to_string(d) << ": missed " << b << " at element " << at << " of " << w.size();
      }
    }
    EXPECT_TRUE(has_nonfinite(filled(d, {NAN}))) << to_string(d) << ", one element";
  }
}

TEST(HasNonfinite, LargeFiniteValuesAreFinite) {
  EXPECT_FALSE(has_nonfinite(filled(DType::kF16, {65504.0f, -65504.0f, 6e-8f})))
      << "65504 is fp16's largest finite value";
  EXPECT_FALSE(has_nonfinite(filled(DType::kBF16, {3.0e38f, -3.0e38f})));
  EXPECT_FALSE(has_nonfinite(filled(DType::kF32, {std::numeric_limits<float>::max()})));
  // What overflow is: 70000 does not fit fp16 and rounds to inf; bf16 keeps fp32's range.
  EXPECT_TRUE(has_nonfinite(filled(DType::kF16, {1.0f, 70000.0f})));
  EXPECT_FALSE(has_nonfinite(filled(DType::kBF16, {1.0f, 70000.0f})));
}

TEST(HasNonfinite, LooksOnlyInsideAView) {
  Tensor t = filled(DType::kF16, {INFINITY, 1.0f, 2.0f, 3.0f, NAN});
  EXPECT_FALSE(has_nonfinite(t.narrow(1, 3)));
  EXPECT_TRUE(has_nonfinite(t.narrow(1, 4)));
  EXPECT_FALSE(has_nonfinite(t.narrow(0, 0)));
  EXPECT_FALSE(has_nonfinite(Tensor()));
}

TEST(HasNonfinite, OtherDtypesAreRefusedNamingTheTensor) {
  const std::string msg = thrown([] { has_nonfinite(Tensor::zeros({3}, DType::kF64)); });
  EXPECT_NE(msg.find("f64"), std::string::npos) << "message: '" << msg << "'";
}

// --- OverflowAgreement: collective ---

TEST(OverflowAgreement, OneRankAloneSeeingAnInfMakesEveryRankSkip) {
  auto world = ProcessGroup::world();
  const int N = world->size(), r = world->rank();
  OverflowAgreement agree(*world);
  std::vector<int> answers;  // issue every collective first, assert afterwards
  for (int q = 0; q < N; ++q) answers.push_back(agree.any(r == q));
  const bool none = agree.any(false), all = agree.any(true);
  for (int q = 0; q < N; ++q)
    EXPECT_TRUE(answers[q]) << "rank " << q << " alone saw an inf; rank " << r << " answered false";
  EXPECT_FALSE(none);
  EXPECT_TRUE(all);
  // Bookkeeping runs on a duplicate: the technique's group counted nothing.
  EXPECT_EQ(world->stats().total_bytes(), 0.0);
  EXPECT_TRUE(world->stats().calls.empty());
}

TEST(OverflowAgreement, ScalersOnEveryRankStayInStep) {
  auto world = ProcessGroup::world();
  const int N = world->size(), r = world->rank();
  OverflowAgreement agree(*world);
  LossScaler s(dyn(1024.0f, 2));
  std::vector<int> applied;
  // Step 2: only the last rank's shard overflows (a ZeRO rank sees only its shard).
  for (int step = 1; step <= 4; ++step) {
    Tensor shard = filled(DType::kF16, {1.0f, 2.0f});
    if (step == 2 && r == N - 1) shard.data<Eigen::half>()[1] = Eigen::half(INFINITY);
    applied.push_back(s.update(agree.any(has_nonfinite(shard))));
  }
  EXPECT_EQ(applied, (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(s.scale(), 1024.0f);  // 1024 → 512 (step 2) → 1024 (2 clean: steps 3, 4)
  EXPECT_EQ(s.skipped_steps(), 1);
}

}  // namespace
}  // namespace llmp
