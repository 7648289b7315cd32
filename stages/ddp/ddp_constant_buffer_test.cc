// DDP with ZeRO-R's constant buffer (--constant_buffer_mb, common/train/constant_buffer.h)
// against DDP with its buckets, for L = 2 and L = 8: the communication memory during a step is
// the bound, whatever L; one all_reduce per chunk, ⌈Ψ/c⌉ of them; the bytes sent and the state
// after 3 steps unchanged (bit for bit). Run on 2 ranks (mpi_test in BUILD).
//
// Glossary: Ψ parameter count, L layers, c = cap/4 buffer elements (fp32).
#include "stages/ddp/ddp.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/constant_buffer_check.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

StrategyFactory ddp_on_world(DDPOptions o, MixedPrecisionConfig mp = {}) {
  return [o, mp](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<DDPStrategy>(model, test_world(), opt, seed, o, mp);
  };
}

TEST(DDPConstantBuffer, CommBufferPeakIsTheBoundForTwoAndEightLayers) {
  DDPOptions cb;
  cb.constant_buffer_mb = kCapMb;
  DDPOptions buckets;
  buckets.bucket_mb = 0.04;  // three buckets on tiny (ddp_test.cc): the default mode at its best
  for (int L : {2, 8}) {
    int chunks = 0;
    const StrategyFactory with = [cb](const GPT& model, AdamWConfig opt, uint64_t seed) {
      return std::make_unique<DDPStrategy>(model, test_world(), opt, seed, cb);
    };
    const OneStepMeasurement m =
        expect_constant_buffer_matches_default(with, ddp_on_world(buckets), L, kCapBytes);
    // ⌈Ψ/c⌉ all_reduces in the step: counted by the buffer as it ran them.
    measure_one_step(with, tiny_with_layers(L), 12, 7, 1, [&chunks](Strategy& s, const GPT&) {
      chunks = dynamic_cast<const DDPStrategy&>(s).last_step_chunks();
    });
    EXPECT_EQ(chunks, (m.psi + kCapBytes / 4 - 1) / (kCapBytes / 4)) << "L=" << L;
  }
}

// bf16: the walk rounds each unit into the 16-bit gradient buffer before the hook packs it, as
// 2-byte elements: 16,384 bytes = 8,192 of them, still below a block (12,704). The 16-bit
// all_reduce adds a + b and rounds, per element, whatever the message: bit-identical to the
// buckets. Against the bf16 baseline: the bound of ddp_mixed_precision_test (1e-2).
TEST(DDPConstantBuffer, Bf16CommBufferPeakIsTheBoundAndTheStateBitIdentical) {
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  DDPOptions cb, buckets;
  cb.constant_buffer_mb = kCapMb;
  buckets.bucket_mb = 0.04;
  for (int L : {2, 8})
    expect_constant_buffer_matches_default(ddp_on_world(cb, mp), ddp_on_world(buckets, mp), L,
                                           kCapBytes, /*max_rel=*/1e-2, mp);
}

TEST(DDPConstantBuffer, RefusesABadBound) {
  for (double mb : {0.0 - 1, 1e-9}) {
    DDPOptions o;
    o.constant_buffer_mb = mb;
    const GPT model(GPTConfig::preset("tiny"));
    EXPECT_THROW(DDPStrategy(model, test_world(), AdamWConfig{}, 7, o), std::invalid_argument)
        << mb;
  }
}

}  // namespace
}  // namespace llmp
