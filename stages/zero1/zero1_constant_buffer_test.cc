// ZeRO-1 with ZeRO-R's constant buffer (--constant_buffer_mb, common/train/constant_buffer.h)
// against ZeRO-1's one reduce-scatter of the whole gradient, for L = 2 and L = 8: the
// communication memory during a step is the bound, whatever L; one reduce-scatter per chunk,
// ⌈Ψ/c⌉ of them; the bytes sent and the state after 3 steps unchanged (bit for bit). Run on 2
// ranks (mpi_test in BUILD).
//
// Glossary: Ψ parameter count, L layers, c = cap/4 buffer elements (fp32).
#include "stages/zero1/zero1.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "tests/constant_buffer_check.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

StrategyFactory zero1_on_world(double constant_buffer_mb, MixedPrecisionConfig mp = {}) {
  return [constant_buffer_mb, mp](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<Zero1Strategy>(model, test_world(), opt, seed, mp, constant_buffer_mb);
  };
}

TEST(Zero1ConstantBuffer, CommBufferPeakIsTheBoundForTwoAndEightLayers) {
  for (int L : {2, 8}) {
    const OneStepMeasurement m = expect_constant_buffer_matches_default(
        zero1_on_world(kCapMb), zero1_on_world(0), L, kCapBytes);
    // No receive buffer: the shard's sums land in the gradient buffer itself.
    EXPECT_EQ(m.grads, 4 * m.psi) << "L=" << L << ": the full gradient buffer, nothing more";
    int chunks = 0;  // ⌈Ψ/c⌉ reduce-scatters in the step: counted by the buffer as it ran them
    measure_one_step(zero1_on_world(kCapMb), tiny_with_layers(L), 12, 7, 1,
                     [&chunks](Strategy& s, const GPT&) {
                       chunks = dynamic_cast<const Zero1Strategy&>(s).last_step_chunks();
                     });
    EXPECT_EQ(chunks, (m.psi + kCapBytes / 4 - 1) / (kCapBytes / 4)) << "L=" << L;
  }
}

// bf16: the walk rounds the gradients into the 16-bit flat buffer, whose chunks are packed as
// 2-byte elements (16,384 bytes = 8,192 of them, below a block's 12,704) and reduce-scattered
// in place into this rank's range of it. The 16-bit reduce-scatter adds a + b and rounds, per
// element, whatever the message: bit-identical to the one reduce-scatter of the whole buffer.
// Against the bf16 baseline: 1e-2, the bound of the stages' bf16 tests (reasons in zero2_test).
TEST(Zero1ConstantBuffer, Bf16CommBufferPeakIsTheBoundAndTheStateBitIdentical) {
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  for (int L : {2, 8})
    expect_constant_buffer_matches_default(zero1_on_world(kCapMb, mp), zero1_on_world(0, mp), L,
                                           kCapBytes, /*max_rel=*/1e-2, mp);
}

TEST(Zero1ConstantBuffer, RefusesABadBound) {
  const GPT model(GPTConfig::preset("tiny"));
  for (double mb : {-1.0, 1e-9})
    EXPECT_THROW(Zero1Strategy(model, test_world(), AdamWConfig{}, 7, {}, mb),
                 std::invalid_argument)
        << mb;
}

}  // namespace
}  // namespace llmp
