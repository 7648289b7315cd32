// ZeRO-2 with --device cuda's placement, at 2 ranks, without a GPU (tests/device_run.h: a
// guarded FakeDevice, bit for bit against ZeRO-2 on the CPU, every host <-> device byte accounted
// for). Here, the staging its collectives must do per step: the reduce-scatters read every unit's
// device gradient (4Ψ bytes down) and write this rank's device shard (4·S_r up); the in-place
// all_gather reads the shard (4·S_r down) and writes the device parameters (4Ψ up).
#include <gtest/gtest.h>

#include <memory>

#include "common/train/dp_util.h"
#include "stages/zero2/zero2.h"
#include "tests/device_run.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 3;

TEST(Zero2OnDevice, EqualsZero2OnTheCpuWithTheCollectivesStaged) {
  const StagingStats st = expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<Zero2Strategy>(model, dp, opt, seed);
      },
      kSteps);
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const ShardLayout shards(psi, test_world().size());
  const int64_t shard = shards.count[test_world().rank()];
  const int64_t per_step = 4 * (psi + shard);
  // The training steps' collectives, then get_state's two gathers of m and v (device shards into
  // a device buffer: 4·S_r down, 4Ψ up each).
  EXPECT_EQ(st.to_host_bytes, kSteps * per_step + 2 * 4 * shard);
  EXPECT_EQ(st.to_device_bytes, kSteps * per_step + 2 * 4 * psi);
}

}  // namespace
}  // namespace llmp
