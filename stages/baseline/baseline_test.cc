// The reference itself: it learns, it is deterministic, and a checkpoint resumes it exactly.
#include "stages/baseline/baseline.h"

#include <gtest/gtest.h>
#include <unistd.h>

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
