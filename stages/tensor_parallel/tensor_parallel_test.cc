// Megatron tensor parallelism (common/tp/tp_strategy.h with sequence_parallel off) against the
// single-rank baseline, and its memory and traffic against the closed forms of
// common/plan/tp_formulas.h. Run on 1, 2 and 4 ranks: t = the world size (mpi_test in BUILD).
//
// The model is tiny with H = 4 heads (so t = 4 holds one head per rank), hs = 8.
// Glossary: t tensor-parallel ranks, B global batch, T sequence, C channels, Ψ_r parameters per
// rank.
#include "common/tp/tp_strategy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/plan/tp_formulas.h"
#include "common/train/report.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

StrategyFactory tp_on_world() {
  return [](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<TensorParallelStrategy>(model.config(), test_world(), opt, seed);
  };
}

GPTConfig tiny_h4() {
  GPTConfig c = GPTConfig::preset("tiny");
  c.heads = 4;
  return c;
}

TEST(TensorParallel, MatchesBaselineWithNonDefaultHyperparameters) {
  EquivalenceConfig cfg;
  cfg.heads = 4;
  cfg.opt.lr = 2e-3f;            // a stage that ignored --lr would drift from the baseline
  cfg.opt.weight_decay = 0.1f;   // ... or --weight_decay
  expect_equivalent(run_against_baseline(tp_on_world(), test_world(), cfg), /*max_rel=*/1e-5);
}

TEST(TensorParallel, ReportRowsMatchTheClosedForms) {
  const GPTConfig c = tiny_h4();
  const int t = test_world().size(), B = 12, T = c.ctx;
  const TpModelDims d{c.vocab, c.ctx, c.layers, c.d, c.heads};
  const OneStepMeasurement m = measure_one_step(tp_on_world(), c, B, /*seed=*/7, /*steps=*/2);
  const double psi_r = tp_params_per_rank(d, t);
  std::printf("t=%d: Ψ_r %.0f (Ψ = %lld); parameters %lld bytes\n", t, psi_r,
              static_cast<long long>(m.psi), static_cast<long long>(m.params));
  EXPECT_EQ(m.params, 4 * psi_r) << "sharded + replicated parameters";
  EXPECT_EQ(m.grads, 4 * psi_r);
  EXPECT_EQ(m.optimizer, 8 * psi_r);
  const ReportRow& act = report_row(m.rows, "activations per block");
  const ReportRow& sent = report_row(m.rows, "sent per step (tp group)");
  std::printf("t=%d: activations per block %.0f bytes (formula %.0f); sent %.0f (formula %.0f)\n", t,
              act.measured, tp_activation_bytes_per_block(d, B, T, t, false), sent.measured,
              tp_bytes_per_step(d, B, T, t));
  EXPECT_EQ(act.measured, tp_activation_bytes_per_block(d, B, T, t, false));
  EXPECT_EQ(sent.measured, tp_bytes_per_step(d, B, T, t));
  for (const ReportRow& r : m.rows) EXPECT_TRUE(report_row_ok(r)) << r.what;
}

TEST(TensorParallel, StateRoundTripThroughTheWholeModelsNames) {
  const GPT model(tiny_h4());
  const int64_t psi = model.layout().num_params();
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int B = 12, T = model.config().ctx;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  auto batch = [&](int step) { sample(corpus.train(), 5, step, 0, B, T, tok.data(), tgt.data()); };
  TensorParallelStrategy a(model.config(), test_world(), AdamWConfig{}, 11);
  for (int s = 1; s <= 3; ++s) batch(s), a.train_step(tok.data(), tgt.data(), B, T, s);
  std::vector<float> p(psi), m(psi), v(psi), p2(psi), m2(psi), v2(psi);
  a.get_state(p.data(), m.data(), v.data());
  TensorParallelStrategy b(model.config(), test_world(), AdamWConfig{}, 999);  // another init
  b.set_state(p.data(), m.data(), v.data());
  b.get_state(p2.data(), m2.data(), v2.data());
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  batch(4);
  EXPECT_EQ(a.train_step(tok.data(), tgt.data(), B, T, 4),
            b.train_step(tok.data(), tgt.data(), B, T, 4));
}

TEST(TensorParallel, ReplicatedParametersStayIdenticalOnEveryRank) {
  // LayerNorms, wpe and the row-parallel biases are held whole by every rank; their gradients
  // must agree without any communication, so after training they are still bit-identical.
  const GPT model(tiny_h4());
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int B = 12, T = model.config().ctx;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  TensorParallelStrategy s(model.config(), test_world(), AdamWConfig{}, 3);
  for (int k = 1; k <= 3; ++k) {
    sample(corpus.train(), 5, k, 0, B, T, tok.data(), tgt.data());
    s.train_step(tok.data(), tgt.data(), B, T, k);
  }
  const int64_t psi = model.layout().num_params();
  std::vector<float> p(psi), m(psi), v(psi);
  s.get_state(p.data(), m.data(), v.data());  // replicated tensors: the last rank's copy
  const GPTLayout& mine = s.model().layout();
  const float* own = s.local_params().f32();  // this rank's own copy
  int checked = 0;
  for (const ParamSpec& ps : mine.params()) {
    if (ps.split != Split::kReplicated) continue;
    ++checked;
    for (int64_t i = 0; i < ps.numel; ++i)
      ASSERT_EQ(own[ps.offset + i], p[ps.global_offset + i]) << ps.name << " element " << i;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace llmp
