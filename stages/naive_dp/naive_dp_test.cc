// Naive DP against the baseline, and its memory and traffic against the closed forms.
// Run on 1, 2, 3 and 4 ranks (mpi_test in BUILD).
//
// Glossary: N ranks, Ψ parameter count, B global batch, T sequence length.
#include "stages/naive_dp/naive_dp.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "tests/equivalence.h"

namespace llmp {
namespace {

// One group for the whole test binary: ProcessGroup::world() returns a new group on every call,
// and a strategy keeps a reference to its group, so it must outlive every strategy.
ProcessGroup& world() {
  static const std::shared_ptr<ProcessGroup> w = ProcessGroup::world();
  return *w;
}

StrategyFactory naive_dp_on_world() {
  return [](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<NaiveDPStrategy>(model, world(), opt, seed);
  };
}

TEST(NaiveDP, MatchesBaselineAfterTenSteps) {
  // tiny preset, global batch 12, T = 16, 10 steps (EquivalenceConfig's defaults).
  EquivalenceResult r = run_against_baseline(naive_dp_on_world(), world());
  EXPECT_LE(r.max_loss_rel, 1e-5);
  EXPECT_LE(r.max_param_rel, 1e-5) << "worst tensor " << r.worst_param;
}

// One training step of a fresh NaiveDPStrategy on the tiny model: the model-state bytes it
// added to this process (deltas around its construction) and its report.
struct OneStep {
  int64_t psi;
  int64_t params, grads, optimizer;
  std::vector<ReportRow> rows;
};

OneStep one_step() {
  auto& mt = MemoryTracker::instance();
  const GPT model(GPTConfig::preset("tiny"));
  const int64_t p0 = mt.current(MemCategory::kParameters), g0 = mt.current(MemCategory::kGradients),
                o0 = mt.current(MemCategory::kOptimizerState);
  NaiveDPStrategy s(model, world(), AdamWConfig{}, 7);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int B = 12, T = model.config().ctx;
  const BatchSlice sl = s.batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  sample(corpus.train(), 7, 1, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
  s.train_step(tok.data(), tgt.data(), B, T, 1);
  return {model.layout().num_params(), mt.current(MemCategory::kParameters) - p0,
          mt.current(MemCategory::kGradients) - g0,
          mt.current(MemCategory::kOptimizerState) - o0, s.report()};
}

const ReportRow& row(const std::vector<ReportRow>& rows, const std::string& what) {
  for (const ReportRow& r : rows)
    if (r.what == what) return r;
  throw std::runtime_error("no report row " + what);
}

TEST(NaiveDP, PerRankMemoryEqualsTheFormulaInBytes) {
  const OneStep s = one_step();
  const int N = world().size();
  const MemoryPlan plan = plan_memory(DPStage::kNaiveDP, s.psi, N, Precision::fp32());
  std::printf("per rank: params %lld B (4Ψ = %.0f), grads %lld B (4Ψ = %.0f), optimizer %lld B "
              "(8Ψ = %.0f): the same on every one of the %d ranks\n",
              static_cast<long long>(s.params), plan.params, static_cast<long long>(s.grads),
              plan.grads, static_cast<long long>(s.optimizer), plan.optimizer, N);
  EXPECT_EQ(s.params, 4 * s.psi) << "full replica of the parameters: 4Ψ";
  EXPECT_EQ(s.grads, 4 * s.psi) << "full replica of the gradients: 4Ψ";
  EXPECT_EQ(s.optimizer, 8 * s.psi) << "full replica of AdamW's m and v: 8Ψ";
  EXPECT_EQ(static_cast<double>(s.params + s.grads + s.optimizer), plan.total());
  for (const char* what : {"parameters", "gradients", "optimizer state"})
    EXPECT_EQ(row(s.rows, what).formula, row(s.rows, what).measured) << what;
}

TEST(NaiveDP, BytesSentPerStepEqualOneAllReduceOfTheGradients) {
  const OneStep s = one_step();
  const int N = world().size();
  const ReportRow& sent = row(s.rows, "sent per step");
  const double expected = 2.0 * (N - 1) / N * s.psi * 4;  // one all_reduce of 4Ψ bytes
  std::printf("rank sent %.0f bytes in one step, formula 2(N-1)/N·4Ψ = %.0f\n", sent.measured,
              expected);
  EXPECT_NEAR(sent.measured, expected, 1e-9 * expected);
  EXPECT_DOUBLE_EQ(sent.formula, expected);
}

}  // namespace
}  // namespace llmp
