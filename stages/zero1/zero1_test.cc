// ZeRO-1 against the baseline, and its memory and traffic against the closed forms.
// Run on 1, 2, 3 and 4 ranks (mpi_test in BUILD).
//
// Glossary: N ranks, Ψ parameters, S = ⌈Ψ/N⌉ shard size.
#include "stages/zero1/zero1.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "tests/equivalence.h"

namespace llmp {
namespace {

// The strategy keeps a reference to its group: the group must outlive it.
ProcessGroup& world() {
  static std::shared_ptr<ProcessGroup> w = ProcessGroup::world();
  return *w;
}

StrategyFactory zero1_on_world() {
  return [](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<Zero1Strategy>(model, world(), opt, seed);
  };
}

TEST(Zero1, MatchesBaselineAfterTenSteps) {
  EquivalenceResult r = run_against_baseline(zero1_on_world(), world());
  EXPECT_LE(r.max_loss_rel, 1e-5);
  EXPECT_LE(r.max_param_rel, 1e-5) << "worst tensor " << r.worst_param;
}

TEST(Zero1, MatchesBaselineWhenShardsArePadded) {
  EquivalenceConfig cfg;
  cfg.vocab = 257;  // Ψ = 34,208: not divisible by 3, so the last shard is padded
  cfg.steps = 4;
  EquivalenceResult r = run_against_baseline(zero1_on_world(), world(), cfg);
  EXPECT_LE(r.max_loss_rel, 1e-5);
  EXPECT_LE(r.max_param_rel, 1e-5) << "worst tensor " << r.worst_param;
}

// One training step of a fresh Zero1Strategy on the tiny model (V = vocab).
struct OneStep {
  int64_t psi, shard;
  int64_t params, grads, optimizer;  // measured deltas after the step
  std::vector<ReportRow> rows;
};

OneStep one_step(int vocab) {
  auto& mt = MemoryTracker::instance();
  GPTConfig mc = GPTConfig::preset("tiny");
  mc.vocab = vocab;
  const GPT model(mc);
  const int64_t p0 = mt.current(MemCategory::kParameters), g0 = mt.current(MemCategory::kGradients),
                o0 = mt.current(MemCategory::kOptimizerState);
  Zero1Strategy z(model, world(), AdamWConfig{}, 7);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", mc.ctx);
  const int B = 12, T = mc.ctx;
  const BatchSlice sl = z.batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  for (int s = 1; s <= 2; ++s) {  // the second step runs with m and v already allocated
    sample(corpus.train(), 7, s, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    z.train_step(tok.data(), tgt.data(), B, T, s);
  }
  return {model.layout().num_params(),
          z.shards().padded,
          mt.current(MemCategory::kParameters) - p0,
          mt.current(MemCategory::kGradients) - g0,
          mt.current(MemCategory::kOptimizerState) - o0,
          z.report()};
}

const ReportRow& row(const std::vector<ReportRow>& rows, const std::string& what) {
  for (const ReportRow& r : rows)
    if (r.what == what) return r;
  throw std::runtime_error("no report row " + what);
}

TEST(Zero1, PerRankMemoryEqualsTheFormulaInBytes) {
  for (int vocab : {256, 257}) {
    const OneStep s = one_step(vocab);
    const int N = world().size();
    const MemoryPlan plan = plan_memory(DPStage::kZeRO1, s.psi, N, Precision::fp32(), true);
    EXPECT_EQ(s.shard, (s.psi + N - 1) / N);
    EXPECT_EQ(s.params, 4 * s.psi) << "parameters are replicated: 4Ψ";
    EXPECT_EQ(s.grads, 4 * s.psi) << "gradients are replicated: 4Ψ";
    EXPECT_EQ(s.optimizer, 8 * s.shard) << "m and v of the shard only: 8⌈Ψ/N⌉";
    EXPECT_EQ(s.params, plan.params);
    EXPECT_EQ(s.grads, plan.grads);
    EXPECT_EQ(s.optimizer, plan.optimizer);
    if (world().rank() == 0)
      std::printf("V=%d Ψ=%lld N=%d: measured params %lld, grads %lld, optimizer %lld bytes\n",
                  vocab, (long long)s.psi, N, (long long)s.params, (long long)s.grads,
                  (long long)s.optimizer);
    for (const char* what : {"parameters", "gradients", "optimizer state"})
      EXPECT_EQ(row(s.rows, what).measured - row(s.rows, what).formula, 0) << what;
  }
}

TEST(Zero1, BytesSentPerStepEqualOneAllReduce) {
  const OneStep s = one_step(257);
  const int N = world().size();
  const ReportRow& sent = row(s.rows, "sent per step");
  const double expected = 2.0 * (N - 1) / N * s.psi * 4;  // reduce_scatter + all_gather
  if (world().rank() == 0)
    std::printf("rank sent %.0f bytes in one step, formula 2(N-1)/N·4Ψ = %.0f\n", sent.measured,
                expected);
  EXPECT_NEAR(sent.measured, expected, 1e-9 * expected);
  EXPECT_DOUBLE_EQ(sent.formula, plan_bytes_per_step(DPStage::kZeRO1, s.psi, N, 4.0));
  EXPECT_NEAR(sent.formula, expected, 1e-9 * expected);
}

}  // namespace
}  // namespace llmp
