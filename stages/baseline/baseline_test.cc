// The reference itself: it learns, it is deterministic, and a checkpoint resumes it exactly.
#include "stages/baseline/baseline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/train/checkpoint_io.h"

namespace llmp {
namespace {

struct Trainer {
  const GPT model{GPTConfig::preset("tiny")};
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int B = 8, T = model.config().ctx;
  std::vector<int32_t> tok = std::vector<int32_t>(B * T), tgt = std::vector<int32_t>(B * T);

  double step(BaselineStrategy& s, int64_t t) {
    sample(corpus.train(), 42, t, 0, B, T, tok.data(), tgt.data());
    return s.train_step(tok.data(), tgt.data(), B, T, t);
  }
};

TEST(Baseline, LossFalls) {
  Trainer run;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  BaselineStrategy s(run.model, opt, 1);
  const double first = run.step(s, 1);
  double last = first;
  for (int t = 2; t <= 60; ++t) last = run.step(s, t);
  std::printf("loss step 1 %.4f, step 60 %.4f\n", first, last);
  EXPECT_NEAR(first, std::log(256.0), 0.2);  // uniform over 256 bytes at initialisation
  EXPECT_LT(last, first - 1.0);
}

TEST(Baseline, SameSeedSameRun) {
  Trainer run;
  BaselineStrategy a(run.model, AdamWConfig{}, 5), b(run.model, AdamWConfig{}, 5);
  for (int t = 1; t <= 3; ++t) EXPECT_EQ(run.step(a, t), run.step(b, t));
  const int64_t psi = run.model.layout().num_params();
  for (int64_t i = 0; i < psi; ++i) ASSERT_EQ(a.params()[i], b.params()[i]) << i;
}

// The baseline is every equivalence test's reference, so it must honour --lr and --weight_decay
// itself: checked against Adam's first step in closed form, not against another run of AdamW.
// On step 1, m̂ = g and v̂ = g², so p1 = p0 - lr·(g/(|g| + ε) + λ·p0): doubling lr doubles the
// step (λ = 0), and λ > 0 moves each decayed element by exactly -lr·λ·p0 more.
TEST(Baseline, HonoursLearningRateAndWeightDecay) {
  Trainer run;
  const int64_t psi = run.model.layout().num_params();
  auto after_one_step = [&](float lr, float wd) {
    AdamWConfig opt;
    opt.lr = lr;
    opt.weight_decay = wd;
    BaselineStrategy s(run.model, opt, 3);
    run.step(s, 1);
    return std::vector<float>(s.params(), s.params() + psi);
  };
  const BaselineStrategy init(run.model, AdamWConfig{}, 3);
  const std::vector<float> p0(init.params(), init.params() + psi);
  const std::vector<float> a = after_one_step(1e-3f, 0), b = after_one_step(2e-3f, 0),
                           c = after_one_step(2e-3f, 0.1f);
  double worst_lr = 0, step = 0;
  int64_t decayed = 0, other = 0;
  for (int64_t i = 0; i < psi; ++i) {
    const double da = a[i] - p0[i], db = b[i] - p0[i], wd = c[i] - b[i];
    step = std::max(step, std::fabs(db));
    worst_lr = std::max(worst_lr, std::fabs(db - 2 * da));
    const double expected = -2e-3 * 0.1 * p0[i];  // -lr·λ·p0
    if (std::fabs(wd - expected) <= 1e-9 + 1e-3 * std::fabs(expected) && expected != 0)
      ++decayed;
    else if (std::fabs(wd) > 1e-9)
      ++other;  // neither decayed by -lr·λ·p0 nor left alone (exempt tensors: biases, LayerNorm)
  }
  std::printf("lr 2e-3 vs 1e-3: largest |Δ(2lr) - 2Δ(lr)| %.3g (step %.3g); weight decay 0.1: "
              "%lld of %lld elements moved by -lr·λ·p0, %lld otherwise\n",
              worst_lr, step, static_cast<long long>(decayed), static_cast<long long>(psi),
              static_cast<long long>(other));
  EXPECT_GT(step, 1.5e-3) << "a step of about lr per element";
  EXPECT_LE(worst_lr, 1e-3 * step) << "the step is not proportional to --lr";
  EXPECT_EQ(other, 0) << "elements moved by weight decay other than -lr·λ·p0";
  EXPECT_GE(decayed, psi / 2) << "--weight_decay ignored (the weight matrices hold most of Ψ)";
}

TEST(Baseline, CheckpointResumesExactly) {
  Trainer run;
  const std::string path = "/tmp/llmp_baseline_test_" + std::to_string(getpid()) + ".safetensors";
  BaselineStrategy straight(run.model, AdamWConfig{}, 9), first_half(run.model, AdamWConfig{}, 9);
  for (int t = 1; t <= 10; ++t) run.step(straight, t);
  for (int t = 1; t <= 5; ++t) run.step(first_half, t);
  save_from(path, run.model, first_half, AdamWConfig{}, 5, "baseline", /*write=*/true);

  BaselineStrategy resumed(run.model, AdamWConfig{}, 12345);  // other init: the load must win
  EXPECT_EQ(load_into(path, run.model, resumed), 5);
  for (int t = 6; t <= 10; ++t) run.step(resumed, t);
  const int64_t psi = run.model.layout().num_params();
  for (int64_t i = 0; i < psi; ++i) ASSERT_EQ(resumed.params()[i], straight.params()[i]) << i;
  std::remove(path.c_str());
}

TEST(Baseline, CheckpointOfAnotherModelIsRefused) {
  Trainer run;
  const std::string path = "/tmp/llmp_baseline_mismatch_" + std::to_string(getpid()) + ".safetensors";
  BaselineStrategy s(run.model, AdamWConfig{}, 1);
  save_from(path, run.model, s, AdamWConfig{}, 0, "baseline", true);
  const GPT mini(GPTConfig::preset("mini"));
  try {
    read_checkpoint(path, mini);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'tiny'"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace llmp
