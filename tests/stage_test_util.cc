// Test helpers of the data-parallel stages (see stage_test_util.h).
#include "tests/stage_test_util.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/tensor/memory.h"

namespace llmp {

ProcessGroup& test_world() {
  static const std::shared_ptr<ProcessGroup> w = ProcessGroup::world();
  return *w;
}

void expect_equivalent(const EquivalenceResult& r, double max_rel) {
  EXPECT_LE(r.max_loss_rel, max_rel);
  EXPECT_LE(r.max_param_rel, max_rel) << "worst tensor " << r.worst_param;
}

const ReportRow& report_row(const std::vector<ReportRow>& rows, const std::string& what) {
  for (const ReportRow& r : rows)
    if (r.what == what) return r;
  throw std::runtime_error("no report row " + what);
}

OneStepMeasurement measure_one_step(const StrategyFactory& make, GPTConfig config,
                                    int global_batch, uint64_t seed, int steps,
                                    const StrategyInspector& inspect) {
  auto& mt = MemoryTracker::instance();
  const GPT model(config);
  const int64_t p0 = mt.current(MemCategory::kParameters), g0 = mt.current(MemCategory::kGradients),
                o0 = mt.current(MemCategory::kOptimizerState);
  std::unique_ptr<Strategy> s = make(model, AdamWConfig{}, seed);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int B = global_batch, T = model.config().ctx;
  const BatchSlice sl = s->batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  for (int step = 1; step <= steps; ++step) {
    sample(corpus.train(), seed, step, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    if (step == steps) mt.reset_peak();  // grads_peak: the last step's
    s->train_step(tok.data(), tgt.data(), B, T, step);
  }
  OneStepMeasurement m;
  m.psi = model.layout().num_params();
  m.params = mt.current(MemCategory::kParameters) - p0;
  m.grads = mt.current(MemCategory::kGradients) - g0;
  m.optimizer = mt.current(MemCategory::kOptimizerState) - o0;
  m.grads_peak = mt.peak(MemCategory::kGradients) - g0;
  m.params_before = p0;
  m.rows = s->report();
  s->finish();
  if (inspect) inspect(*s, model);
  return m;
}

}  // namespace llmp
