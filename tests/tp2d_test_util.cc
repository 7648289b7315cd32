// Shared checks of the 2D / 2.5D stages (see tp2d_test_util.h).
#include "tests/tp2d_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/recompute.h"
#include "common/train/report.h"
#include "common/train/single_rank.h"
#include "common/tp2d/tp2d_strategy.h"
#include "tests/own_walk_checks.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kB = 12;

// Step k (1-based) on training batch k of the fortunes corpus: this rank's slice of it.
double step(Strategy& s, const Corpus& corpus, int T, uint64_t seed, int k) {
  const BatchSlice sl = s.batch_slice(kB);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  sample(corpus.train(), seed, k, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
  return s.train_step(tok.data(), tgt.data(), kB, T, k);
}

// An evaluation on validation batch 1 (this rank's slice), its loss unused.
void evaluate(Strategy& s, const Corpus& corpus, int T) {
  const BatchSlice sl = s.batch_slice(kB);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  sample(corpus.val(), 1, 1, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
  s.eval_loss(tok.data(), tgt.data(), kB, T);
}

}  // namespace

StrategyFactory tp2p5d_on_world(int depth) {
  return [depth](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<Tp2p5dStrategy>(model.config(), test_world(), depth, opt, seed);
  };
}

void expect_tp2d_matches_baseline(int depth, double max_rel) {
  EquivalenceConfig cfg;
  cfg.steps = 4;
  cfg.opt.lr = 2e-3f;           // a stage that ignored --lr would drift from the baseline
  cfg.opt.weight_decay = 0.1f;  // ... or --weight_decay (decay mask on the blocks)
  expect_equivalent(run_against_baseline(tp2p5d_on_world(depth), test_world(), cfg), max_rel);
}

void expect_tp2d_report_ok(int depth) {
  const GPTConfig c = GPTConfig::preset("tiny");
  const OneStepMeasurement m = measure_one_step(tp2p5d_on_world(depth), c, kB, 7, 2);
  for (const char* what :
       {"parameters", "gradients", "optimizer state", "activations per block",
        "sent per step (row group)", "sent per step (column group)",
        "sent per step (depth group)", "collective calls per step"})
    EXPECT_NO_THROW(report_row(m.rows, what)) << what;
  for (const ReportRow& r : m.rows) {
    std::printf("P=%d d=%d: %-30s measured %.0f formula %.0f\n", test_world().size(), depth,
                r.what.c_str(), r.measured, r.formula);
    EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                  << r.formula;
  }
  EXPECT_TRUE(report_row(m.rows, "collective calls per step").count);
  EXPECT_GT(report_row(m.rows, "collective calls per step").measured, 0);
}

void expect_tp2d_state_round_trip(int depth, double max_rel) {
  const GPTConfig c = GPTConfig::preset("tiny");
  const GPT model(c);
  const int64_t psi = model.layout().num_params();
  const int T = c.ctx;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  Tp2p5dStrategy a(c, test_world(), depth, AdamWConfig{}, 11);
  for (int k = 1; k <= 3; ++k) step(a, corpus, T, 5, k);
  std::vector<float> p(psi), m(psi), v(psi), p2(psi), m2(psi), v2(psi);
  a.get_state(p.data(), m.data(), v.data());
  Tp2p5dStrategy b(c, test_world(), depth, AdamWConfig{}, 999);  // another initialisation
  b.set_state(p.data(), m.data(), v.data());
  b.get_state(p2.data(), m2.data(), v2.data());
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  EXPECT_EQ(step(a, corpus, T, 5, 4), step(b, corpus, T, 5, 4));
  // A baseline checkpoint: every rank runs the single-rank model on the whole batch.
  SingleRankStrategy base(model, AdamWConfig{}, 21);
  for (int k = 1; k <= 2; ++k) step(base, corpus, T, 6, k);
  base.get_state(p.data(), m.data(), v.data());
  Tp2p5dStrategy d(c, test_world(), depth, AdamWConfig{}, 5);
  d.set_state(p.data(), m.data(), v.data());
  const double lb = step(base, corpus, T, 6, 3), ld = step(d, corpus, T, 6, 3);
  base.get_state(p.data(), m.data(), v.data());
  d.get_state(p2.data(), m2.data(), v2.data());
  const double dp = max_rel_diff(p2.data(), p.data(), psi);
  std::printf("baseline checkpoint: loss %.7f vs %.7f, params max rel %.2e\n", ld, lb, dp);
  EXPECT_NEAR(ld, lb, max_rel * std::abs(lb));
  EXPECT_LE(dp, max_rel);
}

namespace {

// Three steps of `config` on the test world at depth d from seed 11, on training batches 1-3.
WalkRun train_tp2d(const GPTConfig& config, int depth) {
  const int T = config.ctx;
  static const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  Tp2p5dStrategy s(config, test_world(), depth, AdamWConfig{}, 11);
  std::vector<double> losses;
  for (int k = 1; k <= 3; ++k) {
    RecomputeMeter::instance() = RecomputeMeter();  // as train_main resets it (own_walk_checks.h)
    losses.push_back(step(s, corpus, T, 5, k));
  }
  evaluate(s, corpus, T);  // as train_main validates after the last step, before the report
  return finish_walk_run(s, config, kB, T, std::move(losses));
}

GPTConfig tiny_with_4_blocks() {
  GPTConfig c = GPTConfig::preset("tiny");
  c.layers = 4;  // k = 2 and k = 3 cut different segments
  return c;
}

}  // namespace

void expect_tp2d_recomputation_bit_identical(int depth) {
  expect_recomputation_bit_identical(
      tiny_with_4_blocks(), [depth](const GPTConfig& c) { return train_tp2d(c, depth); },
      {"sent per step (row group)", "sent per step (column group)"},
      test_world().size() / depth > 1);
}

void expect_tp2d_flash_matches_materialized(int depth) {
  expect_flash_matches_materialized(
      tiny_with_4_blocks(), [depth](const GPTConfig& c) { return train_tp2d(c, depth); },
      {"sent per step (row group)", "sent per step (column group)",
       "sent per step (depth group)"});
}

}  // namespace llmp
