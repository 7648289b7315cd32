// Test helpers of the mixture-of-experts stage (moe_test_util.h).
#include "tests/moe_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/tensor/memory.h"
#include "common/testing/max_or_nan.h"
#include "common/train/single_rank.h"
#include "tests/stage_test_util.h"

namespace llmp {

GPTConfig moe_tiny(int top_k, double capacity_factor, int moe_every, int experts) {
  GPTConfig c = GPTConfig::preset("moe-tiny");
  c.experts = experts;
  c.top_k = top_k;
  c.capacity_factor = capacity_factor;
  c.moe_every = moe_every;
  return c;
}

ProcessGrid& moe_grid(int ep) {
  static std::map<int, std::unique_ptr<ProcessGrid>> grids;
  std::unique_ptr<ProcessGrid>& g = grids[ep];
  if (!g) {
    const int W = test_world().size();
    g = std::make_unique<ProcessGrid>(ProcessGroup::world(), expert_parallel_grid(W, ep));
  }
  return *g;
}

std::unique_ptr<ExpertParallelStrategy> make_moe_strategy(const GPT& model, int ep,
                                                          AdamWConfig opt, uint64_t seed,
                                                          MixedPrecisionConfig mp) {
  return std::make_unique<ExpertParallelStrategy>(model, moe_grid(ep), opt, seed, mp);
}

std::vector<int> moe_ep_sizes(int experts) {
  std::vector<int> eps;
  for (int ep = test_world().size(); ep >= 1; --ep)
    if (test_world().size() % ep == 0 && experts % ep == 0) eps.push_back(ep);
  return eps;
}

MoeEquivalence run_moe_against_baseline(const GPTConfig& config, int ep, int steps, int B,
                                        uint64_t seed, AdamWConfig opt, MixedPrecisionConfig mp) {
  const GPT model(config, TpComm::none(), storage_dtype(mp.precision));
  const int T = config.ctx;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  const bool print = test_world().rank() == 0;
  const int64_t psi = model.layout().num_params();
  MoeEquivalence out;
  EquivalenceResult& res = out.r;

  // 1. The reference: the whole global batch on this rank alone (its own MoeContext: ep = 1).
  SingleRankStrategy base(model, opt, seed, mp);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int s = 1; s <= steps; ++s) {
    sample(corpus.train(), seed, s, 0, B, T, tok.data(), tgt.data());
    res.baseline_losses.push_back(base.train_step(tok.data(), tgt.data(), B, T, s));
  }
  out.base_routing = base.last_routing();
  out.base_state.resize(3 * psi);
  base.get_state(out.base_state.data(), out.base_state.data() + psi,
                 out.base_state.data() + 2 * psi);

  // 2. The stage, each rank on its B/W sequences of the same batches.
  std::unique_ptr<ExpertParallelStrategy> stage = make_moe_strategy(model, ep, opt, seed, mp);
  const BatchSlice sl = stage->batch_slice(B);
  std::vector<int32_t> ltok(sl.num_seqs * T), ltgt(sl.num_seqs * T);
  for (int s = 1; s <= steps; ++s) {
    sample(corpus.train(), seed, s, sl.first_seq, sl.num_seqs, T, ltok.data(), ltgt.data());
    res.losses.push_back(stage->train_step(ltok.data(), ltgt.data(), B, T, s));
    const double b = res.baseline_losses[s - 1];
    const double rel = std::fabs(res.losses.back() - b) / std::fabs(b);
    res.max_loss_rel = testing::max_or_nan(res.max_loss_rel, rel);
    if (print)
      std::printf("step %d  baseline loss %.6f  moe (ep %d) loss %.6f  rel diff %.2e\n", s, b, ep,
                  res.losses.back(), rel);
  }
  out.routing = stage->last_routing();
  out.state.resize(3 * psi);
  stage->get_state(out.state.data(), out.state.data() + psi, out.state.data() + 2 * psi);

  // 3. The final parameters over the whole model, and the tensor holding the largest |diff|.
  res.max_param_rel = max_rel_diff(out.state.data(), out.base_state.data(), psi);
  double worst = -1;
  for (const ParamSpec& p : model.layout().params())
    for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
      const double d = std::fabs(static_cast<double>(out.state[i]) - out.base_state[i]);
      if (!std::isnan(worst) && !(d <= worst)) worst = d, res.worst_param = p.name;
    }
  if (print)
    std::printf("W %d, ep %d, E %d, k %d, c %g, moe_every %d: largest relative difference: losses "
                "%.3e, parameters %.3e (largest |diff| in %s); dropped %lld of %lld\n",
                test_world().size(), ep, config.experts, config.top_k, config.capacity_factor,
                config.moe_every,
                res.max_loss_rel, res.max_param_rel, res.worst_param.c_str(),
                static_cast<long long>(out.routing.dropped),
                static_cast<long long>(out.routing.assignments));
  std::fflush(stdout);
  return out;
}

MoeStepMeasurement measure_moe_steps(const GPT& model, int ep, MixedPrecisionConfig mp) {
  const int W = test_world().size(), B = 8, T = model.config().ctx, G = B / W;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  auto& mt = MemoryTracker::instance();
  ProcessGrid& grid = moe_grid(ep);
  MoeStepMeasurement m;
  const int64_t p0 = mt.current(MemCategory::kParameters),
                g0 = mt.current(MemCategory::kGradients),
                o0 = mt.current(MemCategory::kOptimizerState);
  auto s = make_moe_strategy(model, ep, AdamWConfig{}, 7, mp);
  m.params = mt.current(MemCategory::kParameters) - p0;
  m.grads = mt.current(MemCategory::kGradients) - g0;
  m.optimizer = mt.current(MemCategory::kOptimizerState) - o0;
  const BatchSlice sl = s->batch_slice(B);
  std::vector<int32_t> tok(G * T), tgt(G * T);
  double world0 = 0, edp0 = 0;
  for (int step = 1; step <= 2; ++step) {
    sample(corpus.train(), 7, step, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    world0 = grid.world().stats().total_bytes(), edp0 = grid.dp_group().stats().total_bytes();
    s->train_step(tok.data(), tgt.data(), B, T, step);
  }
  m.world_sent = grid.world().stats().total_bytes() - world0;
  m.edp_sent = grid.dp_group().stats().total_bytes() - edp0;
  m.rows = s->report();
  m.assignments = s->last_routing().assignments;
  m.layout_params = s->model().layout().num_params();
  return m;
}

void expect_same_routing(const MoeStats& stage, const MoeStats& baseline) {
  EXPECT_EQ(stage.routed, baseline.routed) << "assignments chosen per expert";
  EXPECT_EQ(stage.kept, baseline.kept) << "assignments that got a slot, per expert";
  EXPECT_EQ(stage.first, baseline.first) << "first choices per expert (f_e's counts)";
  EXPECT_EQ(stage.assignments, baseline.assignments);
  EXPECT_EQ(stage.dropped, baseline.dropped) << "a different token was dropped";
  EXPECT_EQ(stage.aux_terms, baseline.aux_terms) << "(MoE block, sequence) terms of the aux loss";
  EXPECT_EQ(stage.forwards, baseline.forwards * test_world().size())
      << "MoE block forwards: every rank runs each block once";
  EXPECT_NEAR(stage.aux_sum, baseline.aux_sum, 1e-6 * std::fabs(baseline.aux_sum));
}

}  // namespace llmp
