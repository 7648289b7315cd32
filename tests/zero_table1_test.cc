// ZeRO's Table 1 (Rajbhandari et al. 2020, §5 and Table 1) reproduced by measurement at K = 12:
// the per-rank model-state bytes of ZeRO-1, 2 and 3 training the mini model (Ψ = 834,304) with
// --precision bf16 (16-bit parameters and gradients, fp32 master weights with Adam's m and v),
// read from the MemoryTracker after one training step, against the table's closed forms written
// here independently of the stages and of common/plan:
//
//             parameters   gradients   optimizer state   sent per step (2 bytes per element)
//   ZeRO-1    2Ψ           2Ψ          12⌈Ψ/N⌉           2(N-1)/N·2Ψ
//   ZeRO-2    2Ψ           2⌈Ψ/N⌉      12⌈Ψ/N⌉           2(N-1)/N·2Ψ
//   ZeRO-3    2⌈Ψ/N⌉       2⌈Ψ/N⌉      12⌈Ψ/N⌉           3(N-1)/N·2Ψ - (N-1)/N·2·n_f
//
// Run at N = 1, 2, 4 (Ψ divisible by N) and 3 (⌈Ψ/3⌉·3 - Ψ = 2 padding elements, which every
// rank allocates: the rows are exact with the padding).
//
// Glossary: N ranks, Ψ parameters, S = ⌈Ψ/N⌉ shard size, C channels, n_b one block's elements,
// n_0 the embeddings', n_f = 2C the final LayerNorm's, K optimizer bytes per parameter.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/tensor/memory.h"
#include "stages/zero1/zero1.h"
#include "stages/zero2/zero2.h"
#include "stages/zero3/zero3.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int64_t kPsi = 834304;  // mini: 4 blocks of n_b = 198,272, n_0 = 40,960, n_f = 256
constexpr int64_t kBlock = 198272, kEmbed = 40960, kLnF = 256;

struct Measured {
  int64_t params = 0, grads = 0, optimizer = 0;  // bytes the strategy holds after the step
  double sent = 0;                               // bytes test_world() sent in the step
  std::vector<ReportRow> rows;
};

// One bf16 training step of a fresh ZeRO strategy of class Z on the mini model.
template <class Z>
Measured one_bf16_step(const char* name) {
  auto& mt = MemoryTracker::instance();
  const GPT model(GPTConfig::preset("mini"), TpComm::none(), DType::kBF16);
  EXPECT_EQ(model.layout().num_params(), kPsi);
  EXPECT_EQ(model.layout().unit_numel(1), kBlock);
  EXPECT_EQ(model.layout().unit_numel(0), kEmbed);
  EXPECT_EQ(model.layout().unit_numel(model.layout().num_units() - 1), kLnF);
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  const int64_t p0 = mt.current(MemCategory::kParameters), g0 = mt.current(MemCategory::kGradients),
                o0 = mt.current(MemCategory::kOptimizerState);
  Z z(model, test_world(), AdamWConfig{}, /*seed=*/7, mp);
  const int B = 12, T = model.config().ctx;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  const BatchSlice sl = z.batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  sample(corpus.train(), 7, 1, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
  const double bytes0 = test_world().stats().total_bytes();
  z.train_step(tok.data(), tgt.data(), B, T, 1);
  Measured m;
  m.sent = test_world().stats().total_bytes() - bytes0;
  m.params = mt.current(MemCategory::kParameters) - p0;
  m.grads = mt.current(MemCategory::kGradients) - g0;
  m.optimizer = mt.current(MemCategory::kOptimizerState) - o0;
  m.rows = z.report();
  expect_report_is_measured(m.rows, m.sent);  // every row is what was recorded
  for (const ReportRow& row : m.rows)  // ... and equals its closed form, padding included
    EXPECT_NEAR(row.measured, row.formula, 1e-9 * row.formula) << name << ": " << row.what;
  if (test_world().rank() == 0)
    std::printf("%s bf16, N = %d: parameters %lld B, gradients %lld B, optimizer %lld B "
                "(K = 12), sent %.0f B per step\n",
                name, test_world().size(), (long long)m.params, (long long)m.grads,
                (long long)m.optimizer, m.sent);
  return m;
}

int N() { return test_world().size(); }
int64_t S() { return (kPsi + N() - 1) / N(); }
double share() { return double(N() - 1) / N(); }  // (N-1)/N

TEST(ZeroTable1AtK12, Zero1) {
  const Measured m = one_bf16_step<Zero1Strategy>("zero1");
  EXPECT_EQ(m.params, 2 * kPsi) << "2Ψ: bf16 parameters, replicated";
  EXPECT_EQ(m.grads, 2 * kPsi) << "2Ψ: bf16 gradients, replicated";
  EXPECT_EQ(m.optimizer, 12 * S()) << "12⌈Ψ/N⌉: fp32 master, m and v of the shard";
  EXPECT_NEAR(m.sent, 2 * share() * 2 * kPsi, 1e-6) << "reduce_scatter + all_gather of 2Ψ";
}

TEST(ZeroTable1AtK12, Zero2) {
  const Measured m = one_bf16_step<Zero2Strategy>("zero2");
  EXPECT_EQ(m.params, 2 * kPsi) << "2Ψ: bf16 parameters, replicated";
  EXPECT_EQ(m.grads, 2 * S()) << "2⌈Ψ/N⌉: only the bf16 gradient shard survives the step";
  EXPECT_EQ(m.optimizer, 12 * S()) << "12⌈Ψ/N⌉: fp32 master, m and v of the shard";
  EXPECT_NEAR(m.sent, 2 * share() * 2 * kPsi, 1e-6) << "reduce_scatter + all_gather of 2Ψ";
  // One bf16 unit gradient (the largest: a block) next to the shard; fp32 accumulators are not
  // gradients (kOther).
  EXPECT_EQ(report_row(m.rows, "gradients, peak in step").measured, 2 * (S() + kBlock));
}

TEST(ZeroTable1AtK12, Zero3) {
  const Measured m = one_bf16_step<Zero3Strategy>("zero3");
  EXPECT_EQ(m.params, 2 * S()) << "2⌈Ψ/N⌉: the bf16 parameter shard";
  EXPECT_EQ(m.grads, 2 * S()) << "2⌈Ψ/N⌉: the bf16 gradient shard";
  EXPECT_EQ(m.optimizer, 12 * S()) << "12⌈Ψ/N⌉: fp32 master, m and v of the shard";
  // Units gathered as bf16: every unit twice but ln_f once, plus the reduce-scatter of 2Ψ.
  EXPECT_NEAR(m.sent, share() * 2 * (2 * kPsi - kLnF) + share() * 2 * kPsi, 1e-6);
  // Gathered bf16 units of two consecutive walk steps (two blocks, mini) next to the shard.
  EXPECT_EQ(report_row(m.rows, "parameters, peak in step").measured, 2 * (S() + 2 * kBlock));
  EXPECT_EQ(report_row(m.rows, "gradients, peak in step").measured, 2 * (S() + kBlock));
}

}  // namespace
}  // namespace llmp
