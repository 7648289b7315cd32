// 3D tensor parallelism (common/tp3d/tp3d_strategy.h) against the single-rank baseline, its report
// rows against the closed forms of common/plan/tp3d_formulas.h, and its state through the whole
// model's GPT-2 names. Run on P = 1 and 8 ranks (q = 1, 2; mpi_test in BUILD), tiny preset
// (L=2 C=32 H=2 T=16 V=256): at q = 2 a rank holds one head, C/q = 16 channels, V/q² = 64 wte rows.
// Glossary: P ranks, q cube side, B global batch (q² | B), T sequence, Ψ_r parameters per rank.
#include "common/tp3d/tp3d_strategy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/recompute.h"
#include "common/plan/tp3d_formulas.h"
#include "common/train/report.h"
#include "common/train/single_rank.h"
#include "tests/equivalence.h"
#include "tests/own_walk_checks.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

StrategyFactory tp3d_on_world() {
  return [](const GPT& model, AdamWConfig opt, uint64_t seed) -> std::unique_ptr<Strategy> {
    return std::make_unique<Tp3dStrategy>(model.config(), test_world(), opt, seed);
  };
}

// Batch s of the fortunes corpus (sampled with `seed`), the whole global batch on every rank.
void batch(int B, int T, int64_t s, uint64_t seed, std::vector<int32_t>* tok,
           std::vector<int32_t>* tgt) {
  static const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  tok->resize(B * T), tgt->resize(B * T);
  sample(corpus.train(), seed, s, 0, B, T, tok->data(), tgt->data());
}

TEST(Tp3d, MatchesBaselineWithNonDefaultHyperparameters) {
  EquivalenceConfig cfg = non_default_hyperparameters();  // lr 3e-3, weight decay 0.1
  cfg.steps = 3;  // 8 ranks on 2 cores: short
  expect_equivalent(run_against_baseline(tp3d_on_world(), test_world(), cfg), /*max_rel=*/1e-5);
}

TEST(Tp3d, ReportRowsMatchTheClosedForms) {
  const GPTConfig c = GPTConfig::preset("tiny");
  const int B = 16, T = c.ctx;
  const OneStepMeasurement m = measure_one_step(tp3d_on_world(), c, B, /*seed=*/7, /*steps=*/2);
  const Tp3dDims d{c.vocab, c.ctx, c.layers, c.d, c.heads};
  const int P = test_world().size(), side = P == 1 ? 1 : 2;  // q = ∛P
  EXPECT_EQ(m.params, 4 * tp3d_params_per_rank(d, side));
  EXPECT_EQ(m.grads, 4 * tp3d_params_per_rank(d, side));
  EXPECT_EQ(m.optimizer, 8 * tp3d_params_per_rank(d, side));
  const Tp3dBytes f = tp3d_bytes_per_step(d, B, T, side);
  EXPECT_EQ(report_row(m.rows, "sent per step (i-axis group)").measured, f.i_axis);
  EXPECT_EQ(report_row(m.rows, "sent per step (l-axis group)").measured, f.l_axis);
  EXPECT_EQ(report_row(m.rows, "collective calls per step").measured, tp3d_calls_per_step(d));
  EXPECT_EQ(m.rows.size(), 10u);
  for (const ReportRow& r : m.rows) {
    std::printf("P=%d %-36s measured %.0f formula %.0f\n", P, r.what.c_str(), r.measured, r.formula);
    EXPECT_TRUE(report_row_ok(r)) << r.what;
  }
}

TEST(Tp3d, StateRoundTripAndABaselineCheckpointContinuesIdentically) {
  const GPTConfig c = GPTConfig::preset("tiny");
  const GPT model(c);
  const int64_t psi = model.layout().num_params();
  const int B = 8, T = c.ctx;
  std::vector<int32_t> tok, tgt;
  // The baseline (the single-rank strategy) trains 2 steps; its state loads into the cube and into a fresh baseline.
  SingleRankStrategy base(model, AdamWConfig{}, 11);
  for (int s = 1; s <= 2; ++s) batch(B, T, s, 5, &tok, &tgt), base.train_step(tok.data(), tgt.data(), B, T, s);
  std::vector<float> p(psi), mm(psi), v(psi), p2(psi), m2(psi), v2(psi);
  base.get_state(p.data(), mm.data(), v.data());
  Tp3dStrategy cube(c, test_world(), AdamWConfig{}, 999);  // another initialisation
  cube.set_state(p.data(), mm.data(), v.data());
  cube.get_state(p2.data(), m2.data(), v2.data());
  EXPECT_EQ(p, p2);  // get_state(set_state(x)) = x, bit for bit
  EXPECT_EQ(mm, m2);
  EXPECT_EQ(v, v2);
  // One more step of each from the same state, on the same batch: the same loss and parameters
  // (within the equivalence bound: the sums run in another order).
  batch(B, T, 3, 5, &tok, &tgt);
  const double lb = base.train_step(tok.data(), tgt.data(), B, T, 3);
  const double lc = cube.train_step(tok.data(), tgt.data(), B, T, 3);
  EXPECT_NEAR(lc, lb, 1e-5 * lb);
  base.get_state(p.data(), mm.data(), v.data());
  cube.get_state(p2.data(), m2.data(), v2.data());
  EXPECT_LE(max_rel_diff(p2.data(), p.data(), psi), 1e-5);
}

// Three steps of `config` (B = 16) on the cube from seed 11, on batches 1-3.
WalkRun train_cube(const GPTConfig& config) {
  const int B = 16, T = config.ctx;
  Tp3dStrategy s(config, test_world(), AdamWConfig{}, 11);
  std::vector<int32_t> tok, tgt;
  std::vector<double> losses;
  for (int k = 1; k <= 3; ++k) {
    RecomputeMeter::instance() = RecomputeMeter();  // as train_main resets it
    batch(B, T, k, 5, &tok, &tgt);
    losses.push_back(s.train_step(tok.data(), tgt.data(), B, T, k));
  }
  s.eval_loss(tok.data(), tgt.data(), B, T);  // as train_main validates before the report
  return finish_walk_run(s, config, B, T, std::move(losses));
}

GPTConfig tiny_with_4_blocks() {
  GPTConfig c = GPTConfig::preset("tiny");
  c.layers = 4;
  return c;
}

// --recompute selective and full (every 1, 2, 3) on the cube (L = 4, B = 16): the same bits,
// fewer bytes kept, the recomputed forwards' collectives and FLOPs as their closed forms
// (tests/own_walk_checks.h).
TEST(Tp3d, RecomputationIsBitIdentical) {
  expect_recomputation_bit_identical(
      tiny_with_4_blocks(), train_cube,
      {"sent per step (i-axis group)", "sent per step (j-axis group)",
       "sent per step (l-axis group)"},  // the planes' rows: the formulas, unchanged
      test_world().size() > 1);
}

// --attention flash: lse kept per block instead of P, the same training to rounding, the same
// bytes sent.
TEST(Tp3d, FlashAttentionMatchesMaterialized) {
  expect_flash_matches_materialized(
      tiny_with_4_blocks(), train_cube,
      {"sent per step (i-axis group)", "sent per step (j-axis group)",
       "sent per step (l-axis group)", "sent per step (plane group, same l)",
       "sent per step (plane group, same j)"});
}

}  // namespace
}  // namespace llmp
