// ZeRO-3 with ZeRO-R's constant buffer (--constant_buffer_mb, common/train/constant_buffer.h)
// against ZeRO-3's one reduce-scatter per unit, for L = 2 and L = 8: the communication memory
// during a step is the bound, whatever L; one reduce-scatter per chunk, ⌈Ψ/c⌉ of them; the bytes
// sent, the parameter gathers and the state after 3 steps unchanged (bit for bit). Run on 2
// ranks (mpi_test in BUILD).
//
// Glossary: Ψ parameter count, L layers, c = cap/4 buffer elements (fp32).
#include "stages/zero3/zero3.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "tests/constant_buffer_check.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

StrategyFactory zero3_on_world(double constant_buffer_mb, MixedPrecisionConfig mp = {}) {
  return [constant_buffer_mb, mp](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<Zero3Strategy>(model, test_world(), opt, seed, mp, constant_buffer_mb);
  };
}

TEST(Zero3ConstantBuffer, CommBufferPeakIsTheBoundForTwoAndEightLayers) {
  for (int L : {2, 8}) {
    const OneStepMeasurement m = expect_constant_buffer_matches_default(
        zero3_on_world(kCapMb), zero3_on_world(0), L, kCapBytes);
    // The unit gradients live as before: the shard, unit 0 and one other unit at a time.
    const ReportRow& grads = report_row(m.rows, "gradients, peak in step");
    EXPECT_EQ(grads.measured, grads.formula) << "L=" << L;
    const ReportRow& params = report_row(m.rows, "parameters, peak in step");
    EXPECT_EQ(params.measured, params.formula) << "L=" << L << ": the gathers are unchanged";
    int chunks = 0;  // ⌈Ψ/c⌉ reduce-scatters in the step: counted by the buffer as it ran them
    measure_one_step(zero3_on_world(kCapMb), tiny_with_layers(L), 12, 7, 1,
                     [&chunks](Strategy& s, const GPT&) {
                       chunks = dynamic_cast<const Zero3Strategy&>(s).last_step_chunks();
                     });
    EXPECT_EQ(chunks, (m.psi + kCapBytes / 4 - 1) / (kCapBytes / 4)) << "L=" << L;
  }
}

// bf16: each unit's fp32 gradient is rounded once to 16 bits (ConstantBufferGrads) and packed
// as 2-byte elements (16,384 bytes = 8,192 of them, below a block's 12,704). The 16-bit
// reduce-scatter adds a + b and rounds, per element, whatever the message: bit-identical to the
// per-unit mode. Against the bf16 baseline: 1e-2, the bound of zero3_test's bf16 test.
TEST(Zero3ConstantBuffer, Bf16CommBufferPeakIsTheBoundAndTheStateBitIdentical) {
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  for (int L : {2, 8})
    expect_constant_buffer_matches_default(zero3_on_world(kCapMb, mp), zero3_on_world(0, mp), L,
                                           kCapBytes, /*max_rel=*/1e-2, mp);
}

TEST(Zero3ConstantBuffer, RefusesABadBound) {
  const GPT model(GPTConfig::preset("tiny"));
  for (double mb : {-1.0, 1e-9})
    EXPECT_THROW(Zero3Strategy(model, test_world(), AdamWConfig{}, 7, {}, mb),
                 std::invalid_argument)
        << mb;
}

}  // namespace
}  // namespace llmp
