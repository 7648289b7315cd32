// MixedPrecision's optimizer step on one rank: a skipped fp16 step leaves everything as it was and
// does not count as an AdamW update (the next applied step is bias-corrected as the first), the
// update unscales by the S the walk used, and fp32 is the plain AdamW step.
#include "common/train/mixed_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/optim/decay_mask.h"
#include "common/optim/grad_clip.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace {

struct Trainer {
  explicit Trainer(TrainPrecision p)
      : model(GPTConfig::preset("tiny"), TpComm::none(), storage_dtype(p)),
        mp(model, config(p), nullptr),
        psi(model.layout().num_params()),
        params(mp.new_buffer(psi, MemCategory::kParameters)),
        grads(mp.new_buffer(psi, MemCategory::kGradients)),
        opt(psi, AdamWConfig{}, decay_ranges(model.layout(), DecayRule::kMatrices), mp.dtype()) {
    mp.init(7, params, opt);
  }
  static MixedPrecisionConfig config(TrainPrecision p) {
    MixedPrecisionConfig c;
    c.precision = p;
    c.scaler.scale = 1024.0f;
    return c;
  }
  /// Gradients S·g with g = 1e-3·(i mod 7 - 3), rounded into the 16-bit buffer.
  void set_grads(float S, bool with_inf = false) {
    std::vector<float> g(psi);
    for (int64_t i = 0; i < psi; ++i) g[i] = S * 1e-3f * static_cast<float>(i % 7 - 3);
    if (with_inf) g[psi / 2] = std::numeric_limits<float>::infinity();
    cpu::round_to(g.data(), grads.raw(), grads.dtype(), psi);
  }
  std::vector<float> master() const {
    const float* m = const_cast<AdamW&>(opt).master().f32();
    return std::vector<float>(m, m + psi);
  }
  GPT model;
  MixedPrecision mp;
  int64_t psi;
  Tensor params, grads;
  AdamW opt;
};

TEST(MixedPrecisionStep, ASkippedStepIsNotAnAdamUpdate) {
  Trainer skipped(TrainPrecision::kFP16), straight(TrainPrecision::kFP16);
  // Step 1 overflows and is skipped: S 1024 -> 512, nothing changes.
  const std::vector<float> before = skipped.master();
  skipped.set_grads(1024.0f, /*with_inf=*/true);
  EXPECT_FALSE(skipped.mp.optimizer_step(skipped.opt, skipped.params, skipped.grads, 1));
  EXPECT_EQ(skipped.master(), before);
  EXPECT_EQ(skipped.mp.loss_scale(), 512.0f);
  EXPECT_EQ(skipped.mp.skipped_steps(), 1);
  // Step 2 is that run's first update: the same as the other run's step 1 on the same g.
  skipped.set_grads(512.0f);
  EXPECT_TRUE(skipped.mp.optimizer_step(skipped.opt, skipped.params, skipped.grads, 2));
  straight.set_grads(1024.0f);
  EXPECT_TRUE(straight.mp.optimizer_step(straight.opt, straight.params, straight.grads, 1));
  EXPECT_EQ(skipped.master(), straight.master());
  EXPECT_NE(skipped.master(), before);
}

TEST(MixedPrecisionStep, Fp32IsThePlainAdamWStep) {
  Trainer s(TrainPrecision::kFP32);
  std::vector<float> p(s.params.f32(), s.params.f32() + s.psi), g(s.psi);
  for (int64_t i = 0; i < s.psi; ++i) g[i] = 1e-3f * static_cast<float>(i % 7 - 3);
  std::copy(g.begin(), g.end(), s.grads.f32());
  AdamW ref(s.psi, AdamWConfig{}, decay_ranges(s.model.layout(), DecayRule::kMatrices));
  ref.step(p.data(), g.data(), 1);
  EXPECT_TRUE(s.mp.optimizer_step(s.opt, s.params, s.grads, 1));
  for (int64_t i = 0; i < s.psi; ++i) ASSERT_EQ(s.params.f32()[i], p[i]) << i;
}

// --clip_grad through the optimizer step: fp16's gradients are S·g, so the norm must be taken of
// the unscaled values (‖S·g‖/S) and the update must read g·(1/S)·k, k = min(1, c/‖g‖); fp32 reads
// g·k. Checked against AdamW given that one factor directly, with c a quarter of ‖g‖ (clipped).
TEST(MixedPrecisionStep, ClippingTakesTheUnscaledNormAndOneFactorWithOneOverS) {
  for (TrainPrecision p : {TrainPrecision::kFP16, TrainPrecision::kBF16, TrainPrecision::kFP32}) {
    Trainer s(p), ref(p);
    const float S = p == TrainPrecision::kFP16 ? 1024.0f : 1.0f;
    s.set_grads(S);
    ref.set_grads(S);
    std::vector<float> g(s.psi);  // the 16-bit (or fp32) gradients as stored, unscaled
    cpu::widen(s.grads.raw(), s.grads.dtype(), g.data(), s.psi);
    double sq = 0;
    for (float x : g) sq += double(x / S) * double(x / S);
    const double norm = std::sqrt(sq), c = norm / 4;
    GradClip clip(c, nullptr);
    EXPECT_TRUE(s.mp.optimizer_step(s.opt, s.params, s.grads, 1, -1, &clip));
    EXPECT_NEAR(clip.last_norm(), norm, 1e-12 * norm) << to_string(storage_dtype(p));
    const float k = clip_coefficient(norm, c);
    ASSERT_LT(k, 0.3f);
    if (p == TrainPrecision::kFP32) {
      ref.opt.step(ref.params.f32(), ref.grads.f32(), 1, -1, k);
      for (int64_t i = 0; i < s.psi; ++i) ASSERT_EQ(s.params.f32()[i], ref.params.f32()[i]) << i;
    } else {
      ref.opt.step_mixed(ref.params, ref.grads, (1.0f / S) * k, 1);
      EXPECT_EQ(s.master(), ref.master()) << to_string(storage_dtype(p));
    }
  }
}

}  // namespace
}  // namespace llmp
