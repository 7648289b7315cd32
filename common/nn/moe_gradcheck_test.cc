// Finite-difference gradient checks of the mixture-of-experts GPT (moe.h) on moe-tiny: the
// whole model's loss, cross-entropy plus α times the load-balancing loss (and β times the router
// z-loss in one case), against the backward,
// sampling entries of every tensor (the router, each expert, the dense parts), for top-1 and
// top-2 with a capacity factor that drops tokens.
//
// Routing is piecewise constant in the parameters (top-k choices, slots, the counts f_e): a
// finite difference is only meaningful where a step of ±ε leaves it unchanged, so every loss
// evaluation compares the routing with the unperturbed one, a sample that crossed a boundary is
// skipped (there is no derivative there), and the test fails if more than 1 in 4 are.
//
// Glossary: B batch, T sequence, E experts, k experts per token, c capacity factor, α aux weight.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/init.h"
#include "common/nn/unit_runner.h"
#include "kernels/cpu/grad_check.h"

namespace llmp {
namespace {
using testing::GradCheckResult;

constexpr float kEps = 1e-2f;
constexpr double kFloor = 1e-2;
constexpr double kTol = 2e-2;

struct Case {
  int k;
  double c;
  double alpha;
  double beta = 0;  // the router z-loss
};

class MoeGradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(MoeGradCheck, WholeModel) {
  GPTConfig cfg = GPTConfig::preset("moe-tiny");
  cfg.top_k = GetParam().k, cfg.capacity_factor = GetParam().c;
  cfg.aux_loss_coef = GetParam().alpha, cfg.z_loss_coef = GetParam().beta;
  const GPT m(cfg);
  const GPTLayout& lay = m.layout();
  const int B = 2, T = 8;
  std::vector<float> params(lay.num_params());
  m.init_params(params.data(), 7);
  for (int64_t i = 0; i < lay.num_params(); ++i)
    params[i] += static_cast<float>(0.2 * (uniform_at(99, i) - 0.5));
  // A router with clear preferences (its weights scaled up), so that routing is not uniform.
  for (const ParamSpec& p : lay.params())
    if (p.name.find("router") != std::string::npos)
      for (int64_t i = 0; i < p.numel; ++i) params[p.offset + i] *= 5.0f;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int i = 0; i < B * T; ++i) {
    tok[i] = static_cast<int32_t>(uniform_at(5, i) * 256) % 256;
    tgt[i] = static_cast<int32_t>(uniform_at(6, i) * 256) % 256;
  }
  MoeContext& ctx = *m.moe();
  std::vector<float> grads(lay.num_params(), 0.f);
  ctx.stats().reset(cfg.experts);
  // Trained as the stages train: loss scale 1/(B·T) (the mean), so the load-balancing and
  // z-losses must scale with it (moe.cc); the gradients times B·T are then those of the sum.
  forward_backward(m, params.data(), grads.data(), tok.data(), tgt.data(), B, T,
                   1.0f / (B * T));
  for (float& g : grads) g *= static_cast<float>(B * T);
  const MoeStats base = ctx.stats();
  EXPECT_GT(base.dropped, 0) << "the capacity factor should drop tokens in this test";
  // Σ CE + α·T·Σ_g aux_g + β·Σ_t lse_t²: loss_scale 1 weighs each sequence's load-balancing
  // loss by α·T and each token's z-loss by β.
  bool crossed = false;  // whether an evaluation routed differently from the unperturbed model
  auto loss = [&] {
    ctx.stats().reset(cfg.experts);
    const double ce = forward_loss(m, params.data(), tok.data(), tgt.data(), B, T) * B * T;
    const MoeStats& s = ctx.stats();
    if (s.kept != base.kept || s.routed != base.routed || s.first != base.first) crossed = true;
    return ce + cfg.aux_loss_coef * T * s.aux_sum + cfg.z_loss_coef * s.z_sum;
  };
  GradCheckResult worst;
  int checked = 0, skipped = 0;
  for (const ParamSpec& p : lay.params()) {
    const auto idx = testing::sample_indices(grads.data() + p.offset, p.numel, 3, 3, p.numel);
    for (const int64_t i : idx) {
      crossed = false;
      const GradCheckResult r = testing::check_grad_at(
          params.data() + p.offset, grads.data() + p.offset, {i}, loss, kEps, kFloor);
      if (crossed) {  // ±ε crossed a routing boundary: no derivative there
        ++skipped;
        continue;
      }
      ++checked;
      EXPECT_LT(r.max_rel_err, kTol) << p.name << "[" << i << "]";
      testing::merge(&worst, r);
    }
  }
  std::printf("%d entries checked, %d skipped (a routing boundary within ±ε)\n", checked, skipped);
  EXPECT_LE(skipped * 3, checked) << "too many samples cross a routing boundary";
  testing::print_result("WHOLE MOE MODEL (worst)", worst);
}

INSTANTIATE_TEST_SUITE_P(TopK, MoeGradCheck,
                         ::testing::Values(Case{1, 1.0, 0.01}, Case{2, 1.0, 0.01},
                                           Case{2, 0.5, 1.0}, Case{1, 1.0, 0.01, 0.1}));

}  // namespace
}  // namespace llmp
