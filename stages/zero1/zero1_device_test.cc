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
