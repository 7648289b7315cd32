// The shared checks of the long-sequence stages (cp_test_util.h).
#include "tests/cp_test_util.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/train/report.h"

namespace llmp {

StrategyFactory context_parallel_on_world(CoreFactory make) {
  return [make](const GPT& model, AdamWConfig opt, uint64_t seed) -> std::unique_ptr<Strategy> {
    return std::make_unique<ContextParallelStrategy>(model, test_world(), make, opt, seed);
  };
}

GPTConfig cp_model(int T) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.heads = 4;
  c.ctx = T;
  return c;
}

void expect_cp_matches_baseline(const CoreFactory& make, int T) {
  EquivalenceConfig cfg = non_default_hyperparameters();
  cfg.heads = 4;
  cfg.ctx = T;
  cfg.T = T;
  expect_equivalent(run_against_baseline(context_parallel_on_world(make), test_world(), cfg),
                    /*max_rel=*/1e-5);
}

std::vector<ReportRow> expect_cp_report_rows_match(const CoreFactory& make, int T, int B) {
  const OneStepMeasurement m =
      measure_one_step(context_parallel_on_world(make), cp_model(T), B, /*seed=*/7, /*steps=*/2);
  EXPECT_EQ(m.params, 4 * m.psi) << "replicated parameters";
  EXPECT_EQ(m.optimizer, 8 * m.psi);
  for (const char* what : {"gradient all_reduce/step", "peak attention scores",
                           "activations kept per block", "attention fwd FLOPs/step"})
    EXPECT_NO_THROW(report_row(m.rows, what)) << what;
  bool attention_row = false;
  for (const ReportRow& r : m.rows) {
    EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                  << r.formula << " (" << r.formula_text << ")";
    if (r.what == "attention sent/step") attention_row = true;
  }
  EXPECT_TRUE(attention_row) << "no 'attention sent/step' row";
  return m.rows;
}

void expect_cp_state_round_trip(const CoreFactory& make) {
  const GPT model(cp_model(16));
  const int64_t psi = model.layout().num_params();
  const int B = 6, T = 16;
  ContextParallelStrategy a(model, test_world(), make, AdamWConfig{}, 11);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int s = 1; s <= 3; ++s) {
    sample(corpus.train(), 5, s, 0, B, T, tok.data(), tgt.data());
    a.train_step(tok.data(), tgt.data(), B, T, s);
  }
  std::vector<float> p(psi), m(psi), v(psi), p2(psi), m2(psi), v2(psi);
  a.get_state(p.data(), m.data(), v.data());
  ContextParallelStrategy b(model, test_world(), make, AdamWConfig{}, 999);  // another init
  b.set_state(p.data(), m.data(), v.data());
  b.get_state(p2.data(), m2.data(), v2.data());
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  sample(corpus.train(), 5, 4, 0, B, T, tok.data(), tgt.data());
  EXPECT_EQ(a.train_step(tok.data(), tgt.data(), B, T, 4),
            b.train_step(tok.data(), tgt.data(), B, T, 4));
}

}  // namespace llmp
