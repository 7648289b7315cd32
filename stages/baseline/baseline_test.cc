// The reference itself: it learns, it is deterministic, and a checkpoint resumes it exactly, in
// fp32 and in mixed precision (bf16; fp16 with its loss scaler's state), across precisions too.
#include "stages/baseline/baseline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/max_or_nan.h"
#include "common/train/checkpoint_io.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace {

struct Trainer {
  explicit Trainer(DType activations = DType::kF32)
      : model(GPTConfig::preset("tiny"), TpComm::none(), activations) {}
  const GPT model;
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
    step = testing::max_or_nan(step, std::fabs(db));
    worst_lr = testing::max_or_nan(worst_lr, std::fabs(db - 2 * da));
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

// Everything a step depends on, bit for bit: the full-precision state (get_state: the fp32
// master weights under mixed precision, m, v) and the working copy (16-bit or fp32) as bytes.
struct FullState {
  std::vector<float> params, m, v;
  std::vector<uint8_t> working;
};

FullState full_state(BaselineStrategy& s, const GPT& model) {
  const int64_t psi = model.layout().num_params();
  FullState f{std::vector<float>(psi), std::vector<float>(psi), std::vector<float>(psi), {}};
  s.get_state(f.params.data(), f.m.data(), f.v.data());
  const Tensor& w = s.params_tensor();
  const auto* bytes = static_cast<const uint8_t*>(w.raw());
  f.working.assign(bytes, bytes + w.nbytes());
  return f;
}

// First differing element of two equal-length vectors, or -1 (bitwise: memcmp per element).
template <class T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  return -1;
}

void expect_same_state(const FullState& a, const FullState& b) {
  EXPECT_EQ(first_difference(a.params, b.params), -1) << "master (full-precision) parameters";
  EXPECT_EQ(first_difference(a.working, b.working), -1) << "working copy (byte index)";
  EXPECT_EQ(first_difference(a.m, b.m), -1) << "exp_avg";
  EXPECT_EQ(first_difference(a.v, b.v), -1) << "exp_avg_sq";
}

std::string temp_path(const char* what) {
  return "/tmp/llmp_baseline_" + std::string(what) + "_" + std::to_string(getpid()) +
         ".safetensors";
}

MixedPrecisionConfig mixed(TrainPrecision p) {
  MixedPrecisionConfig c;
  c.precision = p;
  c.scaler.scale = 1024;         // fp16's initial S
  c.scaler.growth_interval = 3;  // S doubles every 3 clean steps: it moves between save and load
  return c;
}

// bf16: 10 steps straight equal 5 steps, save, load into a run initialised otherwise, 5 more:
// the master weights, the bf16 working copy (rounded from the loaded master weights), m and v,
// bit for bit. The file records the precision and holds the fp32 master weights.
TEST(Baseline, Bf16CheckpointResumesBitExactly) {
  Trainer run(DType::kBF16);
  const std::string path = temp_path("bf16");
  const MixedPrecisionConfig mp = mixed(TrainPrecision::kBF16);
  BaselineStrategy straight(run.model, AdamWConfig{}, 9, mp), first(run.model, AdamWConfig{}, 9, mp);
  for (int t = 1; t <= 10; ++t) run.step(straight, t);
  for (int t = 1; t <= 5; ++t) run.step(first, t);
  const FullState saved = full_state(first, run.model);
  save_from(path, run.model, first, AdamWConfig{}, 5, "baseline", /*write=*/true);

  const ModelCheckpoint ck = read_checkpoint(path, run.model);
  EXPECT_EQ(ck.file.metadata.at("precision"), "bf16");
  EXPECT_EQ(ck.precision.precision, TrainPrecision::kBF16);
  EXPECT_EQ(ck.file.metadata.count("loss_scale"), 0u) << "bf16 has no loss scaler";
  const int64_t psi = run.model.layout().num_params();
  std::vector<float> p(psi), m(psi), v(psi);
  unpack_state(ck, run.model, p.data(), m.data(), v.data());
  EXPECT_EQ(first_difference(p, saved.params), -1) << "the file holds the fp32 master weights";

  BaselineStrategy resumed(run.model, AdamWConfig{}, 12345, mp);  // other init: the load wins
  EXPECT_EQ(load_into(path, run.model, resumed), 5);
  expect_same_state(full_state(resumed, run.model), saved);
  for (int t = 6; t <= 10; ++t) run.step(resumed, t);
  expect_same_state(full_state(resumed, run.model), full_state(straight, run.model));
  std::remove(path.c_str());
}

// fp16 with the dynamic scaler: the same, and the scaler resumes with its state. S doubles every
// 3 clean steps and step 3 overflows on purpose (skipped, S halved: 512), so at the save (step 5)
// S, the clean-step counter (2) and the skipped count (1) all differ from a fresh scaler's; the
// next clean step (6) doubles S only if the counter was restored.
TEST(Baseline, Fp16CheckpointResumesWithItsLossScale) {
  Trainer run(DType::kF16);
  const std::string path = temp_path("fp16");
  const MixedPrecisionConfig mp = mixed(TrainPrecision::kFP16);
  setenv("LLMP_TEST_OVERFLOW_STEP", "3", 1);  // read by MixedPrecision's constructor
  BaselineStrategy straight(run.model, AdamWConfig{}, 9, mp), first(run.model, AdamWConfig{}, 9, mp);
  BaselineStrategy resumed(run.model, AdamWConfig{}, 12345, mp);
  unsetenv("LLMP_TEST_OVERFLOW_STEP");
  for (int t = 1; t <= 10; ++t) run.step(straight, t);
  for (int t = 1; t <= 5; ++t) run.step(first, t);
  const LossScaler& saved = *first.mixed_precision().scaler();
  std::printf("at the save: loss scale %g, %lld clean steps in a row, %lld skipped (fresh: %g)\n",
              saved.scale(), static_cast<long long>(saved.clean_steps_in_a_row()),
              static_cast<long long>(saved.skipped_steps()), mp.scaler.scale);
  ASSERT_EQ(saved.skipped_steps(), 1) << "the injected overflow at step 3";
  ASSERT_NE(saved.scale(), mp.scaler.scale) << "the test needs S to have moved";
  ASSERT_NE(saved.clean_steps_in_a_row(), 0);
  save_from(path, run.model, first, AdamWConfig{}, 5, "baseline", /*write=*/true);

  const ModelCheckpoint ck = read_checkpoint(path, run.model);
  EXPECT_EQ(ck.file.metadata.at("precision"), "fp16");
  EXPECT_EQ(ck.precision.loss_scale, saved.scale());
  EXPECT_EQ(ck.precision.clean_steps, saved.clean_steps_in_a_row());
  EXPECT_EQ(ck.precision.skipped_steps, 1);

  EXPECT_EQ(load_into(path, run.model, resumed), 5);
  const LossScaler& r = *resumed.mixed_precision().scaler();
  EXPECT_EQ(r.scale(), saved.scale());
  EXPECT_EQ(r.clean_steps_in_a_row(), saved.clean_steps_in_a_row());
  EXPECT_EQ(r.skipped_steps(), 1);
  expect_same_state(full_state(resumed, run.model), full_state(first, run.model));
  for (int t = 6; t <= 10; ++t) run.step(resumed, t);
  const LossScaler& s = *straight.mixed_precision().scaler();
  EXPECT_EQ(r.scale(), s.scale());
  EXPECT_EQ(r.clean_steps_in_a_row(), s.clean_steps_in_a_row());
  EXPECT_EQ(r.skipped_steps(), s.skipped_steps());
  EXPECT_EQ(resumed.step_note(), straight.step_note());
  expect_same_state(full_state(resumed, run.model), full_state(straight, run.model));
  std::remove(path.c_str());
}

// Across precisions: an fp32 checkpoint loads into a bf16 run (its master weights are the fp32
// parameters exactly, its working copy their bf16 rounding, m and v as saved) and trains on.
TEST(Baseline, Fp32CheckpointLoadsIntoABf16Run) {
  Trainer fp32_run, bf16_run(DType::kBF16);
  const std::string path = temp_path("fp32_to_bf16");
  BaselineStrategy a(fp32_run.model, AdamWConfig{}, 9);
  for (int t = 1; t <= 3; ++t) fp32_run.step(a, t);
  const FullState saved = full_state(a, fp32_run.model);
  save_from(path, fp32_run.model, a, AdamWConfig{}, 3, "baseline", /*write=*/true);
  EXPECT_EQ(read_checkpoint(path, fp32_run.model).file.metadata.at("precision"), "fp32");

  BaselineStrategy b(bf16_run.model, AdamWConfig{}, 12345, mixed(TrainPrecision::kBF16));
  EXPECT_EQ(load_into(path, bf16_run.model, b), 3);
  const FullState loaded = full_state(b, bf16_run.model);
  EXPECT_EQ(first_difference(loaded.params, saved.params), -1);
  EXPECT_EQ(first_difference(loaded.m, saved.m), -1);
  EXPECT_EQ(first_difference(loaded.v, saved.v), -1);
  std::vector<uint8_t> rounded(saved.params.size() * 2);
  cpu::round_to(saved.params.data(), rounded.data(), DType::kBF16, saved.params.size());
  EXPECT_EQ(first_difference(loaded.working, rounded), -1) << "the bf16 copy of the master";
  EXPECT_TRUE(std::isfinite(bf16_run.step(b, 4)));
  std::remove(path.c_str());
}

// A checkpoint's precision metadata is checked like the rest of the file.
TEST(Baseline, CheckpointWithAnUnknownPrecisionIsRefused) {
  Trainer run;
  const std::string path = temp_path("fp8");
  const int64_t psi = run.model.layout().num_params();
  std::vector<float> zeros(psi, 0.0f);
  for (const auto& [md, want] :
       std::vector<std::pair<std::map<std::string, std::string>, std::string>>{
           {{{"precision", "fp8"}}, "precision 'fp8'"},
           {{{"precision", "fp16"}, {"loss_scale", "-2"}, {"loss_scale_clean_steps", "0"},
             {"loss_scale_skipped_steps", "0"}},
            "loss_scale '-2'"},
           {{{"precision", "fp16"}}, "needs loss_scale"}}) {
    write_checkpoint(path, run.model, AdamWConfig{}, zeros.data(), zeros.data(), zeros.data(), 1,
                     "baseline", md);
    try {
      read_checkpoint(path, run.model);
      ADD_FAILURE() << "expected an error for " << want;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
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
