// ZeRO-1 with --device cuda's placement, at 2 ranks, without a GPU (tests/device_run.h: a guarded
// FakeDevice, bit for bit against ZeRO-1 on the CPU, every host <-> device byte accounted for).
//
// Here, the staging its two collectives must do per step, S_r = count(r) this rank's shard:
//   reduce_scatter_v(gradients -> gradient shard)   reads the Ψ-float gradient (4Ψ down) and
//                                                    writes the shard (4·S_r up);
//   all_gather_v in place (parameter slice -> all)   reads this rank's slice (4·S_r down) and
//                                                    writes the Ψ parameters (4Ψ up);
// then get_state's two gathers of the sharded m and v (4·S_r down, 4Ψ up each).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/train/dp_util.h"
#include "stages/zero1/zero1.h"
#include "tests/device_run.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 3;

std::unique_ptr<Strategy> zero1(const GPT& model, ProcessGroup& dp, AdamWConfig opt,
                                uint64_t seed, const MixedPrecisionConfig& mp) {
  return std::make_unique<Zero1Strategy>(model, dp, opt, seed, mp);
}

TEST(Zero1OnDevice, EqualsZero1OnTheCpuWithTheCollectivesStaged) {
  expect_sharded_run_equals_cpu(zero1, kSteps, TrainPrecision::kFP32);
}

// Mixed precision on the device: the 16-bit parameters and gradients, the gradient shard, the
// fp32 master shard, m and v on the FakeDevice; FlatGrads' rounding, AdamW's mixed update of the
// shard (rounded into the 16-bit slice) and fp16's overflow check through the device's kernels.
// Bit-identical to the same precision on the CPU, the staging at 2 bytes per element.
TEST(Zero1OnDevice, Bf16EqualsZero1Bf16OnTheCpu) {
  expect_sharded_run_equals_cpu(zero1, kSteps, TrainPrecision::kBF16);
}

// fp16 with an overflow injected at step 2 on rank 0 only: the reduce-scatter sums rank 0's inf
// into whichever shards it lands in, and the agreement over the ranks makes a clean shard skip
// too. The same skipped step on the device as on the CPU.
TEST(Zero1OnDevice, Fp16SkipsAnInjectedOverflowOnEveryRankAsOnTheCpu) {
  const InjectedOverflow overflow(/*step=*/2, /*ranks=*/"0");
  expect_sharded_run_equals_cpu(zero1, kSteps, TrainPrecision::kFP16);
}

// The constant buffer is host memory: refused by name on a device, before any training.
TEST(Zero1OnDevice, RefusesTheConstantBuffer) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = GPT(GPTConfig::preset("tiny")).with_device(Device::kCUDA);
  auto dp = test_world().duplicate();
  try {
    Zero1Strategy s(model, *dp, AdamWConfig{}, 11, MixedPrecisionConfig{}, 0.25);
    FAIL() << "a constant buffer was accepted on a device";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "Zero1Strategy: the constant buffer is host memory; --device cuda runs without "
                 "--constant_buffer_mb");
  }
}

}  // namespace
}  // namespace llmp
