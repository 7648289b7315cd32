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

#include <cstdlib>
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

TEST(Zero1OnDevice, EqualsZero1OnTheCpuWithTheCollectivesStaged) {
  const StagingStats st = expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<Zero1Strategy>(model, dp, opt, seed);
      },
      kSteps);
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const ShardLayout shards(psi, test_world().size());
  const int64_t shard = shards.count[test_world().rank()];
  const int64_t per_step = 4 * (psi + shard);  // each way: 4Ψ + 4·S_r
  EXPECT_EQ(st.to_host_bytes, kSteps * per_step + 2 * 4 * shard);
  EXPECT_EQ(st.to_device_bytes, kSteps * per_step + 2 * 4 * psi);
}

// Mixed precision on the device: the 16-bit parameters and gradients, the gradient shard, the
// fp32 master shard, m and v on the FakeDevice; FlatGrads' rounding, AdamW's mixed update of the
// shard (rounded into the 16-bit slice) and fp16's overflow check through the device's kernels.
// Bit-identical to the same precision on the CPU. Its own copy: the master shard up once (4·S_r;
// the 16-bit parameters cross as 2Ψ, device_run.h). The staging is the fp32 one at 2 bytes per
// element: the reduce-scatter reads 2Ψ down and writes 2·S_r up, the all_gather reads 2·S_r down
// and writes 2Ψ up; get_state gathers the master shard, m and v (4·S_r down, 4Ψ up each).
void expect_mixed_zero1_equals_cpu(TrainPrecision precision) {
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const ShardLayout shards(psi, test_world().size());
  const int64_t shard = shards.count[test_world().rank()];
  DirectCopies copies;
  copies.up = 4 * shard;
  MixedPrecisionConfig mp;
  mp.precision = precision;
  mp.scaler.scale = 1024.0f;  // fp16 only
  const StagingStats st = expect_device_run_equals_cpu(
      [mp](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<Zero1Strategy>(model, dp, opt, seed, mp);
      },
      kSteps, copies, precision);
  EXPECT_EQ(st.to_host_bytes, kSteps * 2 * (psi + shard) + 3 * 4 * shard);
  EXPECT_EQ(st.to_device_bytes, kSteps * 2 * (psi + shard) + 3 * 4 * psi);
}

TEST(Zero1OnDevice, Bf16EqualsZero1Bf16OnTheCpu) {
  expect_mixed_zero1_equals_cpu(TrainPrecision::kBF16);
}

// fp16 with an overflow injected at step 2 on rank 0 only: the reduce-scatter sums rank 0's inf
// into whichever shards it lands in, and the agreement over the ranks makes a clean shard skip
// too. The same skipped step on the device as on the CPU.
TEST(Zero1OnDevice, Fp16SkipsAnInjectedOverflowOnEveryRankAsOnTheCpu) {
  setenv("LLMP_TEST_OVERFLOW_STEP", "2", 1);
  setenv("LLMP_TEST_OVERFLOW_RANKS", "0", 1);
  expect_mixed_zero1_equals_cpu(TrainPrecision::kFP16);
  unsetenv("LLMP_TEST_OVERFLOW_STEP");
  unsetenv("LLMP_TEST_OVERFLOW_RANKS");
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
