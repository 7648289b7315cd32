// This project's GPT-2 against GPT-2 as Hugging Face transformers computes it
// (tools/make_gpt2_reference.py wrote testdata/gpt2_reference once: a small random GPT-2 saved
// by save_pretrained, and transformers' losses and gradient norms on fixed tokens).
//
// Every other check of the model compares the project with itself: each stage against the
// baseline, the backward against finite differences of the forward (gpt_gradcheck_test). A
// forward that is wrong in a self-consistent way (attention scaled by 1/d instead of 1/√d,
// LayerNorm's ε, GELU's constant, a position embedding off by one) passes all of those. Here the
// same weights, read through --load's reader as a foreign file, must give transformers' numbers:
//   - the mean cross-entropy of every prefix t = 1..T of every sequence (prefix_losses[b][t-1]),
//     each a forward of its own with T = t (a causal model's first t outputs do not depend on
//     what follows; a leak from the future changes them);
//   - the mean over all B·T positions, and the L2 norm of each parameter's gradient of it,
//     computed each of the model's ways (materialized or flash attention, full or selective
//     recomputation);
//   - 4 training steps on that batch with torch.optim.AdamW (weight decay on the tensors of >= 2
//     dimensions, nanoGPT's groups) after clip_grad_norm_: each step's loss and gradient norm,
//     from this project's AdamW, decay mask and GradClip (whose own tests check them against
//     the algorithm as written by hand).
// Bounds (fp32 on both sides, sums in other orders): losses within 2e-5 nats, gradient norms
// within 2e-5 relative; measured 3.9e-7 and 4.6e-7 (2026-11-29, torch 1.13, transformers
// 4.39.3). Planted, each fails it: attention scaled by 1/d (0.31 nats) and wpe row t+1 for
// position t (1.5 nats), both of which gpt_gradcheck_test passes; LayerNorm's ε at 1e-6 where
// it is added (9.9e-4 nats; the constant itself must equal config.json's, a static_assert in
// gpt2_config.cc); GELU's erf form for its tanh form (1.4e-4 nats, gradients 1.6e-4).
// In the steps: AdamW's ε inside the square root, √(v̂ + ε) (adamw_test passes it; 1.2e-3 nats
// at step 2), weight decay applied to the already updated parameter, v̂ without its bias
// correction, biases and LayerNorm decayed.
//
// Glossary: B sequences, T positions, V vocab.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/nn/recompute.h"
#include "common/nn/unit_runner.h"
#include "common/optim/adamw.h"
#include "common/optim/decay_mask.h"
#include "common/optim/grad_clip.h"
#include "common/train/checkpoint_io.h"

namespace llmp {
namespace {

const std::string kDir = "common/train/testdata/gpt2_reference/";  // runfiles-relative
constexpr double kLossBound = 2e-5, kGradRelBound = 2e-5;
// After updates: AdamW divides by √v̂, so rounding-level differences in a gradient grow into
// differences of the update; measured 2.5e-7 nats over the 4 steps (losses 6.26 → 1.72).
constexpr double kTrainLossBound = 1e-5;

// The model's ways of computing the same function: each must give transformers' numbers.
struct Variant {
  const char* name;
  AttentionMethod attention;
  Recompute recompute;
};
const Variant kVariants[] = {
    {"materialized attention", AttentionMethod::kMaterialized, Recompute::kNone},
    {"--attention flash", AttentionMethod::kFlash, Recompute::kNone},
    {"--recompute full", AttentionMethod::kMaterialized, Recompute::kFull},
    {"--recompute selective", AttentionMethod::kMaterialized, Recompute::kSelective},
};

GPTConfig with(GPTConfig c, const Variant& v) {
  c.attention = v.attention, c.recompute = v.recompute;
  return c;
}

struct Reference {
  nlohmann::json j;
  ModelCheckpoint ck = read_checkpoint(kDir + "model.safetensors");
  GPT model;
  std::vector<float> params;
  int B = 0, T = 0;
  std::vector<int32_t> tokens, targets;

  explicit Reference(const Variant& v = kVariants[0]) : model(with(ck.config, v)) {
    std::ifstream f(kDir + "reference.json");
    j = nlohmann::json::parse(f);
    B = j["B"], T = j["T"];
    tokens = j["tokens"].get<std::vector<int32_t>>();
    targets = j["targets"].get<std::vector<int32_t>>();
    params.resize(model.layout().num_params());
    for (const ParamSpec& p : model.layout().params())
      std::copy(ck.param(p.name), ck.param(p.name) + p.numel, params.begin() + p.offset);
  }
};

TEST(Gpt2Reference, TheFileIsReadAsTransformersWroteIt) {
  const Reference r;
  EXPECT_EQ(r.ck.origin, "foreign");
  EXPECT_EQ(r.ck.prefix, "transformer.");
  const GPTConfig& c = r.ck.config;
  EXPECT_EQ(c.vocab, 256);
  EXPECT_EQ(c.ctx, 16);
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.d, 32);
  EXPECT_EQ(c.heads, 4);  // from config.json beside the file: the shapes cannot tell it
  EXPECT_EQ(r.T, c.ctx);
  EXPECT_EQ(r.tokens.size(), size_t(r.B) * r.T);
}

TEST(Gpt2Reference, EveryPrefixLossIsTransformers) {
  for (const Variant& v : kVariants) {
    const Reference r(v);
    double worst = 0;
    int prefixes = 0;
    for (int b = 0; b < r.B; ++b)
      for (int t = 1; t <= r.T; ++t) {
        // Flash attention's blockwise kernels take T in two causal halves: even T only.
        if (v.attention == AttentionMethod::kFlash && t % 2 == 1) continue;
        ++prefixes;
        const double ours = forward_loss(r.model, r.params.data(), &r.tokens[size_t(b) * r.T],
                                         &r.targets[size_t(b) * r.T], 1, t);
        const double theirs = r.j["prefix_losses"][b][t - 1];
        EXPECT_NEAR(ours, theirs, kLossBound)
            << v.name << ": sequence " << b << ", first " << t << " positions";
        worst = std::max(worst, std::abs(ours - theirs));
      }
    const double ours = forward_loss(r.model, r.params.data(), r.tokens.data(),
                                     r.targets.data(), r.B, r.T);
    const double theirs = r.j["loss"];
    EXPECT_NEAR(ours, theirs, kLossBound) << v.name << ": all " << r.B << " x " << r.T;
    worst = std::max(worst, std::abs(ours - theirs));
    std::printf("%s: loss %.7f here, %.7f in transformers; largest difference over %d prefixes "
                "and the whole batch %.2e nats (bound %g)\n",
                v.name, ours, theirs, prefixes, worst, kLossBound);
  }
}

TEST(Gpt2Reference, EveryGradientNormIsTransformers) {
  for (const Variant& v : kVariants) {
    const Reference r(v);
    std::vector<float> grads(r.params.size(), 0.f);
    // Gradients of the mean: loss_scale 1/(B·T) on Σ loss.
    const double mean = forward_backward(r.model, r.params.data(), grads.data(), r.tokens.data(),
                                         r.targets.data(), r.B, r.T, 1.0f / (r.B * r.T));
    EXPECT_NEAR(mean, double(r.j["loss"]), kLossBound) << v.name;
    double worst = 0;
    int n = 0;
    for (const ParamSpec& p : r.model.layout().params()) {
      double ss = 0;
      for (int64_t i = 0; i < p.numel; ++i) ss += double(grads[p.offset + i]) * grads[p.offset + i];
      ASSERT_TRUE(r.j["grad_norms"].contains(p.name)) << p.name;
      const double theirs = r.j["grad_norms"][p.name], ours = std::sqrt(ss);
      const double rel = std::abs(ours - theirs) / theirs;
      EXPECT_LE(rel, kGradRelBound) << v.name << ", " << p.name << ": " << ours << " here, "
                                    << theirs << " in transformers";
      worst = std::max(worst, rel);
      ++n;
    }
    EXPECT_EQ(n, int(r.j["grad_norms"].size())) << "every tensor transformers has";
    std::printf("%s: %d gradient norms, largest relative difference %.2e (bound %g)\n", v.name,
                n, worst, kGradRelBound);
  }
}

TEST(Gpt2Reference, FourAdamWStepsWithClippingAreTorchs) {
  Reference r;
  const nlohmann::json& tr = r.j["train"];
  AdamWConfig cfg;
  cfg.lr = tr["lr"], cfg.beta1 = tr["beta1"], cfg.beta2 = tr["beta2"], cfg.eps = tr["eps"];
  cfg.weight_decay = tr["weight_decay"], cfg.clip_grad = tr["clip_grad"];
  const int64_t n = r.model.layout().num_params();
  AdamW opt(n, cfg, decay_ranges(r.model.layout(), DecayRule::kMatrices));
  GradClip clip(cfg.clip_grad, nullptr);
  Tensor grads = Tensor::zeros({n}, DType::kF32, MemCategory::kGradients);
  double worst = 0;
  for (int t = 1; t <= int(tr["steps"]); ++t) {
    grads.fill(0.0f);
    const double loss = forward_backward(r.model, r.params.data(), grads.f32(), r.tokens.data(),
                                         r.targets.data(), r.B, r.T, 1.0f / (r.B * r.T));
    const float coef = clip.coefficient({grads});
    const double theirs = tr["losses"][t - 1], norm = tr["grad_norms"][t - 1];
    EXPECT_NEAR(loss, theirs, kTrainLossBound) << "step " << t;
    EXPECT_NEAR(clip.last_norm(), norm, kGradRelBound * norm) << "step " << t;
    EXPECT_LT(coef, 1.0f) << "step " << t << ": the clipping is what this checks too";
    std::printf("step %d: loss %.6f here, %.6f in torch; grad norm %.6f, %.6f\n", t, loss,
                theirs, clip.last_norm(), norm);
    worst = std::max(worst, std::abs(loss - theirs));
    opt.step(r.params.data(), grads.f32(), t, -1, coef);
  }
  std::printf("largest loss difference over %d steps %.2e nats (bound %g)\n", int(tr["steps"]),
              worst, kTrainLossBound);
}

}  // namespace
}  // namespace llmp
