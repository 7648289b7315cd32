// What stages/README.md's long-sequence table claims, measured by the table's own code at a small
// size (T = 32, B = 2, p = 2): every method holds fewer attention-score bytes per rank than the
// baseline on whole sequences, ring attention the fewest (no scores kept, two (T/p)² blocks);
// Ulysses sends the fewest bytes; every method sends something and takes time. Flash attention on
// one rank (--attention flash) keeps no scores either: its peak is the backward's two T×T blocks.
// With --device cuda's placement (a guarded FakeDevice with kernels/cpu as its kernels, the
// collectives of device tensors staged by the MPI backend) every row measures what the CPU's did.
//
// Glossary: p ranks, B sequences, T positions.
#include "stages/long_sequences/table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/tensor/memory.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

TEST(LongSequenceTable, TheMethodsRankAsTheReadmeSays) {
  const int T = 32, B = 2, p = test_world().size();
  const GPTConfig c = table_model(T);
  const Row base = measure_baseline(c, B, /*timed=*/1);  // on every rank, alone
  double ring_peak = 0, ulysses_sent = 0, least_peak = base.score_peak, least_sent = 1e300;
  int measured = 0;
  for (const Method& me : methods()) {
    ASSERT_EQ(me.split_error(T, c.heads, p), "") << me.label;
    const Row r = measure_method(me, c, B, /*timed=*/1, test_world());
    EXPECT_LT(r.score_peak, base.score_peak) << me.label;
    EXPECT_GT(r.sent, 0) << me.label;
    EXPECT_GT(r.calls, 0) << me.label;
    EXPECT_GT(r.tokens_per_s, 0) << me.label;
    least_peak = std::min(least_peak, r.score_peak);
    least_sent = std::min(least_sent, r.sent);
    if (me.label.rfind("ring attention", 0) == 0) ring_peak = r.score_peak;
    if (me.label == "Ulysses") ulysses_sent = r.sent;
    ++measured;
  }
  EXPECT_EQ(measured, 3);
  EXPECT_EQ(ring_peak, least_peak);
  EXPECT_EQ(ulysses_sent, least_sent);
  // Flash attention on one rank: no scores kept, only the backward's P and dS of one (b, h):
  // 8T² bytes, below the baseline's and every method's but ring attention's 8(T/p)².
  GPTConfig flash = c;
  flash.attention = AttentionMethod::kFlash;
  const Row f = measure_baseline(flash, B, /*timed=*/1);
  EXPECT_EQ(f.method, "flash attention (1 rank)");
  EXPECT_EQ(f.score_peak, 8.0 * T * T);
  EXPECT_LT(f.kept, base.kept);
  EXPECT_GT(f.score_peak, ring_peak);
}

// --recompute full: every method keeps fewer activation bytes per block (its block inputs only)
// and sends more (its forward's communication again), with no higher a score peak; the baseline
// too keeps fewer. What the table's --recompute full rows show against the default ones.
TEST(LongSequenceTable, FullRecomputationTradesBytesSentForActivationsKept) {
  const int T = 32, B = 2;
  const GPTConfig c = table_model(T);
  GPTConfig cf = c;
  cf.recompute = Recompute::kFull;
  EXPECT_LT(measure_baseline(cf, B, 1).kept, measure_baseline(c, B, 1).kept);
  for (const Method& me : methods()) {
    const Row none = measure_method(me, c, B, /*timed=*/1, test_world());
    const Row full = measure_method(me, cf, B, /*timed=*/1, test_world());
    EXPECT_LT(full.kept, none.kept) << me.label;
    EXPECT_EQ(full.kept, 4.0 * B * (T / test_world().size()) * c.d) << me.label
                                                                      << ": the block input";
    EXPECT_LE(full.score_peak, none.score_peak) << me.label;
    if (test_world().size() > 1) {
      EXPECT_GT(full.sent, none.sent) << me.label;
      EXPECT_GT(full.calls, none.calls) << me.label;
    }
  }
}

// The rows on a device: the same attention-score peaks, bytes sent, calls and activations kept as
// on the CPU (a buffer left on the host, or a collective that skipped its staging, would change
// one of them or fail the guarded FakeDevice's host-read check), and the walks took time.
TEST(LongSequenceTable, OnADeviceEveryRowMeasuresWhatTheCpuDid) {
  const int T = 32, B = 2;
  for (AttentionMethod a : {AttentionMethod::kMaterialized, AttentionMethod::kFlash}) {
    GPTConfig c = table_model(T);
    c.attention = a;
    const Row cpu = measure_baseline(c, B, /*timed=*/1);
    testing::FakeDevice dev(/*guarded=*/true);
    testing::FakeKernelOps ops(dev);
    const Row gpu = measure_baseline(c, B, /*timed=*/1, Device::kCUDA);
    EXPECT_GE(MemoryTracker::instance().peak(Device::kCUDA, MemCategory::kActivations),
              gpu.score_peak)
        << gpu.method << ": the scores were not device memory";
    EXPECT_EQ(gpu.method, cpu.method);
    EXPECT_EQ(gpu.score_peak, cpu.score_peak) << gpu.method;
    EXPECT_EQ(gpu.kept, cpu.kept) << gpu.method;
    EXPECT_GT(gpu.tokens_per_s, 0) << gpu.method;
  }
  const GPTConfig c = table_model(T);
  for (const Method& me : methods()) {
    const Row cpu = measure_method(me, c, B, /*timed=*/1, test_world());
    testing::FakeDevice dev(/*guarded=*/true);
    testing::FakeKernelOps ops(dev);
    MemoryTracker::instance().reset_peak();
    const Row gpu = measure_method(me, c, B, /*timed=*/1, test_world(), Device::kCUDA);
    EXPECT_GE(MemoryTracker::instance().peak(Device::kCUDA, MemCategory::kActivations),
              gpu.score_peak)
        << me.label << ": the scores were not device memory";
    EXPECT_EQ(gpu.score_peak, cpu.score_peak) << me.label;
    EXPECT_EQ(gpu.sent, cpu.sent) << me.label;
    EXPECT_EQ(gpu.calls, cpu.calls) << me.label;
    EXPECT_EQ(gpu.kept, cpu.kept) << me.label;
    EXPECT_GT(gpu.tokens_per_s, 0) << me.label;
  }
}

}  // namespace
}  // namespace llmp
