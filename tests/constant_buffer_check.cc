// The constant-buffer check of the data-parallel stages (see constant_buffer_check.h).
#include "tests/constant_buffer_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/tensor/memory.h"

namespace llmp {
namespace {

// Parameters, m and v (Ψ floats each, get_state) of a fresh strategy after `steps` steps on the
// batches measure_one_step uses (seed 7, global batch 12).
std::vector<float> state_after(const StrategyFactory& make, const GPTConfig& config, int steps,
                               DType activations) {
  const GPT model(config, TpComm::none(), activations);
  std::unique_ptr<Strategy> s = make(model, AdamWConfig{}, /*seed=*/7);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", config.ctx);
  const int B = 12, T = config.ctx;
  const BatchSlice sl = s->batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  for (int step = 1; step <= steps; ++step) {
    sample(corpus.train(), 7, step, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    s->train_step(tok.data(), tgt.data(), B, T, step);
  }
  const int64_t psi = model.layout().num_params();
  std::vector<float> state(3 * psi);
  s->get_state(state.data(), state.data() + psi, state.data() + 2 * psi);
  return state;
}

}  // namespace

GPTConfig tiny_with_layers(int layers) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.layers = layers;
  return c;
}

OneStepMeasurement expect_constant_buffer_matches_default(const StrategyFactory& with,
                                                          const StrategyFactory& without,
                                                          int layers, int64_t cap_bytes,
                                                          double max_rel,
                                                          MixedPrecisionConfig mp) {
  const GPTConfig config = tiny_with_layers(layers);
  const DType activations = storage_dtype(mp.precision);
  const int64_t b = dtype_size(activations);
  const GPTLayout layout(config);
  const int64_t psi = layout.num_params();
  int64_t largest = 0;
  for (int u = 0; u < layout.num_units(); ++u) largest = std::max(largest, layout.unit_numel(u));
  EXPECT_LT(cap_bytes, b * largest) << "the bound must cut the largest unit";
  EXPECT_LT(cap_bytes, b * psi) << "the bound must be smaller than the gradient";

  // 2. The peak of the communication memory during a step, and the bytes sent.
  const OneStepMeasurement on =
      measure_one_step(with, config, 12, /*seed=*/7, /*steps=*/2, {}, activations);
  const int64_t peak = MemoryTracker::instance().peak(MemCategory::kCommBuffers);
  const OneStepMeasurement off =
      measure_one_step(without, config, 12, /*seed=*/7, /*steps=*/2, {}, activations);
  const ReportRow& cb = report_row(on.rows, "comm buffer, peak in step");
  const ReportRow& sent = report_row(on.rows, "sent per step");
  std::printf("L=%d Ψ=%lld: comm buffer peak %.0f bytes (tracker %lld), bound cap = %.0f; sent "
              "%.0f bytes per step, default mode %.0f\n",
              layers, static_cast<long long>(psi), cb.measured, static_cast<long long>(peak),
              cb.formula, sent.measured, report_row(off.rows, "sent per step").measured);
  EXPECT_EQ(cb.measured, static_cast<double>(peak)) << "the row must be the tracker's peak";
  EXPECT_EQ(peak, cap_bytes) << "L=" << layers << ": the communication memory is the bound";
  EXPECT_EQ(cb.formula, static_cast<double>(cap_bytes));
  EXPECT_EQ(sent.measured, report_row(off.rows, "sent per step").measured)
      << "the chunks partition Ψ: the bytes sent must not change";
  EXPECT_EQ(sent.formula, report_row(off.rows, "sent per step").formula);

  // 3. Bit-identical to the stage's default mode after 3 steps.
  const std::vector<float> on3 = state_after(with, config, 3, activations),
                           off3 = state_after(without, config, 3, activations);
  EXPECT_EQ(on3.size(), off3.size());
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < std::min(on3.size(), off3.size()); ++i)
    if (std::memcmp(&on3[i], &off3[i], sizeof(float)) != 0) {
      if (differ++ == 0) first = static_cast<int64_t>(i);
    }
  EXPECT_EQ(differ, 0) << "L=" << layers << ": " << differ << " of " << on3.size()
                       << " state floats differ from the default mode (first: element "
                       << first << " of params | m | v)";

  // 4. Against the baseline.
  EquivalenceConfig eq;
  eq.layers = layers;
  eq.steps = 3;
  eq.mp = mp;
  expect_equivalent(run_against_baseline(with, test_world(), eq), max_rel);
  return on;
}

}  // namespace llmp
