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
#include "tests/tp_test_util.h"

namespace llmp {
namespace {

StrategyFactory tp_on_world() { return tensor_parallel_on_world(/*sequence_parallel=*/false); }

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
  // Collective calls (a count): 4 per block (g forward twice, f backward twice), the embedding's g,
  // the head's f (a one-rank group counts its calls too), and for t > 1 the cross-entropy's two
  // all_reduces per chunk of rows (one chunk here: B·T = 192 rows ≤ 2^22/(V/t)): 4L + 4 = 12 at
  // L = 2; at t = 1 the whole vocabulary is the rank's and nothing is reduced: 4L + 2 = 10.
  const ReportRow& calls = report_row(m.rows, "collective calls per step");
  std::printf("t=%d: collective calls per step %.0f (formula %.0f)\n", t, calls.measured,
              tp_collective_calls_per_step(d, B, T, t, false));
  EXPECT_TRUE(calls.count) << "a count of calls, printed as calls, not bytes";
  EXPECT_EQ(calls.measured, tp_collective_calls_per_step(d, B, T, t, false));
  EXPECT_EQ(calls.measured, 4 * c.layers + (t > 1 ? 4 : 2));
  for (const ReportRow& r : m.rows) EXPECT_TRUE(report_row_ok(r)) << r.what;
}

TEST(TensorParallel, StateRoundTripThroughTheWholeModelsNames) {
  const GPT model(tiny_h4());
  const int64_t psi = model.layout().num_params();
  const int B = 12, T = model.config().ctx;
  TensorParallelStrategy a(model.config(), test_world(), AdamWConfig{}, 11);
  train_steps(a, B, 3, 5);
  std::vector<float> p(psi), m(psi), v(psi), p2(psi), m2(psi), v2(psi);
  a.get_state(p.data(), m.data(), v.data());
  TensorParallelStrategy b(model.config(), test_world(), AdamWConfig{}, 999);  // another init
  b.set_state(p.data(), m.data(), v.data());
  b.get_state(p2.data(), m2.data(), v2.data());
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  // One more step from the same state: the same loss.
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  sample(corpus.train(), 5, 4, 0, B, T, tok.data(), tgt.data());
  EXPECT_EQ(a.train_step(tok.data(), tgt.data(), B, T, 4),
            b.train_step(tok.data(), tgt.data(), B, T, 4));
}

TEST(TensorParallel, ReplicatedParametersStayIdenticalOnEveryRank) {
  // LayerNorms, wpe and the row-parallel biases are held whole by every rank; their gradients
  // must agree without any communication, so after training they are still bit-identical.
  TensorParallelStrategy s(tiny_h4(), test_world(), AdamWConfig{}, 3);
  train_steps(s, /*B=*/12, /*steps=*/3, /*seed=*/5);
  EXPECT_GT(expect_replicated_params_identical(s), 0);
}

}  // namespace
}  // namespace llmp
