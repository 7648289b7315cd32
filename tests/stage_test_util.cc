// Test helpers of the data-parallel stages (see stage_test_util.h).
#include "tests/stage_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>
#include <string>
#include <cstring>
#include <cstdlib>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
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

void expect_report_is_measured(const std::vector<ReportRow>& rows, double sent) {
  const auto& mt = MemoryTracker::instance();
  const std::pair<const char*, double> recorded[] = {
      {"parameters", static_cast<double>(mt.current(MemCategory::kParameters))},
      {"gradients", static_cast<double>(mt.current(MemCategory::kGradients))},
      {"optimizer state", static_cast<double>(mt.current(MemCategory::kOptimizerState))},
      {"parameters, peak in step", static_cast<double>(mt.peak(MemCategory::kParameters))},
      {"gradients, peak in step", static_cast<double>(mt.peak(MemCategory::kGradients))},
      {"sent per step", sent},
  };
  int checked = 0;
  for (const ReportRow& row : rows)
    for (const auto& [what, value] : recorded)
      if (row.what == what) {
        EXPECT_EQ(row.measured, value) << "report row '" << what << "' (formula " << row.formula
                                       << ") is not what the tracker / CommStats recorded";
        ++checked;
      }
  EXPECT_GE(checked, 3) << "the report lost its memory rows";
}

OneStepMeasurement measure_one_step(const StrategyFactory& make, GPTConfig config,
                                    int global_batch, uint64_t seed, int steps,
                                    const StrategyInspector& inspect, DType activations) {
  auto& mt = MemoryTracker::instance();
  const GPT model(config, TpComm::none(), activations);
  const int64_t p0 = mt.current(MemCategory::kParameters), g0 = mt.current(MemCategory::kGradients),
                o0 = mt.current(MemCategory::kOptimizerState), total0 = mt.current_total();
  std::unique_ptr<Strategy> s = make(model, AdamWConfig{}, seed);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int B = global_batch, T = model.config().ctx;
  const BatchSlice sl = s->batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  double bytes0 = 0;
  for (int step = 1; step <= steps; ++step) {
    sample(corpus.train(), seed, step, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    if (step == steps) mt.reset_peak(), bytes0 = test_world().stats().total_bytes();
    s->train_step(tok.data(), tgt.data(), B, T, step);
  }
  const double sent = test_world().stats().total_bytes() - bytes0;
  OneStepMeasurement m;
  m.psi = model.layout().num_params();
  m.params = mt.current(MemCategory::kParameters) - p0;
  m.grads = mt.current(MemCategory::kGradients) - g0;
  m.optimizer = mt.current(MemCategory::kOptimizerState) - o0;
  m.grads_peak = mt.peak(MemCategory::kGradients) - g0;
  m.params_before = p0;
  m.total_peak = mt.peak_total() - total0;
  m.local_batch = sl.num_seqs;
  m.rows = s->report();
  expect_report_is_measured(m.rows, sent);
  s->finish();
  if (inspect) inspect(*s, model);
  return m;
}

int64_t largest_unit_after_embeddings(const GPTLayout& layout) {
  int64_t largest = 0;
  for (int u = 1; u < layout.num_units(); ++u) largest = std::max(largest, layout.unit_numel(u));
  return largest;
}

int64_t walk_peak_bytes(const GPTConfig& config, int B) {
  auto& mt = MemoryTracker::instance();
  const GPT model(config);
  const int T = config.ctx;
  const int64_t psi = model.layout().num_params();
  Tensor params = Tensor::empty({psi}, DType::kF32, MemCategory::kParameters);
  Tensor grads = Tensor::zeros({psi}, DType::kF32, MemCategory::kGradients);
  model.init_params(params.f32(), /*seed=*/1);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int i = 0; i < B * T; ++i) tok[i] = i % 251, tgt[i] = (i + 1) % 251;
  const int64_t before = mt.current_total();
  mt.reset_peak();
  forward_backward(model, params.f32(), grads.f32(), tok.data(), tgt.data(), B, T, 1.0f);
  return mt.peak_total() - before;
}

void expect_total_peak_within_plan(const OneStepMeasurement& m, DPStage stage,
                                   const GPTConfig& config, int64_t transient_bytes,
                                   const std::string& transient_text) {
  const int N = test_world().size();
  const MemoryPlan plan =
      plan_memory(stage, static_cast<double>(m.psi), N, Precision::fp32(), /*padded=*/true);
  const int64_t walk = walk_peak_bytes(config, m.local_batch);
  const double bound = plan.total() + walk + transient_bytes;
  const double slack = bound - m.total_peak, full = 4.0 * m.psi;
  std::printf("%s, N = %d, rank %d: total peak %lld B <= model states %.0f B (ZeRO Table 1, "
              "padded) + walk %lld B (B/N = %d, measured alone) + %s %lld B = %.0f B; slack "
              "%.0f B, 4Ψ = %.0f B\n",
              to_string(stage), N, test_world().rank(), static_cast<long long>(m.total_peak),
              plan.total(), static_cast<long long>(walk), m.local_batch,
              transient_text.c_str(), static_cast<long long>(transient_bytes), bound, slack, full);
  EXPECT_LE(m.total_peak, bound) << "a buffer beyond the model states, the walk and the "
                                 << transient_text << " is alive at the peak";
  EXPECT_LT(slack, full) << "the bound is too loose to catch a hidden full-Ψ buffer";
}

MixedPrecisionConfig precision_config(TrainPrecision p) {
  MixedPrecisionConfig mp;
  mp.precision = p;  // fp16: the dynamic scaler's defaults (S = 2^16, window 1000)
  return mp;
}

void expect_injected_overflow_skipped_by_every_rank(
    const std::function<std::unique_ptr<MixedPrecisionStrategy>(const GPT& model)>& make,
    const std::function<const Tensor&(const MixedPrecisionStrategy&)>& params16,
    const GPTConfig& config) {
  const int N = test_world().size();
  setenv("LLMP_TEST_OVERFLOW_STEP", "2", 1);
  setenv("LLMP_TEST_OVERFLOW_RANKS", std::to_string(N - 1).c_str(), 1);
  const GPT model(config, TpComm::none(), DType::kF16);
  std::unique_ptr<MixedPrecisionStrategy> strategy = make(model);
  unsetenv("LLMP_TEST_OVERFLOW_STEP");
  unsetenv("LLMP_TEST_OVERFLOW_RANKS");
  auto& s = *strategy;
  const int64_t psi = model.layout().num_params();
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", config.ctx);
  const int B = 12, T = config.ctx;
  const BatchSlice sl = s.batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  // Everything a step may change: the 16-bit parameters' bits, master weights, m, v.
  struct State {
    std::vector<uint16_t> p16;
    std::vector<float> master, m, v;
    bool operator==(const State& o) const {
      return p16 == o.p16 && std::memcmp(master.data(), o.master.data(), master.size() * 4) == 0 &&
             std::memcmp(m.data(), o.m.data(), m.size() * 4) == 0 &&
             std::memcmp(v.data(), o.v.data(), v.size() * 4) == 0;
    }
  };
  const auto state = [&] {
    // The 16-bit parameters this rank holds (a MoE rank: its experts only), the whole state.
    const int64_t held = params16(s).numel();
    State st{std::vector<uint16_t>(held), std::vector<float>(psi), std::vector<float>(psi),
             std::vector<float>(psi)};
    std::memcpy(st.p16.data(), params16(s).raw(), held * 2);
    s.get_state(st.master.data(), st.m.data(), st.v.data());
    return st;
  };
  const auto step = [&](int k) {
    sample(corpus.train(), 7, k, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    s.train_step(tok.data(), tgt.data(), B, T, k);
  };
  step(1);
  const float scale1 = s.mixed_precision().loss_scale();
  const State before = state();
  EXPECT_EQ(s.mixed_precision().skipped_steps(), 0) << "step 1 should train";
  step(2);
  std::printf("rank %d of %d: step 2 (overflow injected on rank %d): loss scale %g -> %g, "
              "skipped %lld\n",
              test_world().rank(), N, N - 1, scale1, s.mixed_precision().loss_scale(),
              static_cast<long long>(s.mixed_precision().skipped_steps()));
  EXPECT_EQ(s.mixed_precision().skipped_steps(), 1) << "this rank did not skip the step";
  EXPECT_EQ(s.mixed_precision().loss_scale(), scale1 / 2) << "the scale did not back off";
  EXPECT_TRUE(state() == before) << "a skipped step changed the parameters or the optimizer state";
  step(3);
  EXPECT_EQ(s.mixed_precision().skipped_steps(), 1);
  EXPECT_FALSE(state() == before) << "step 3 did not train";
}

}  // namespace llmp
