// ZeRO-2 with --device cuda's placement, at 2 ranks, without a GPU (tests/device_run.h: a
// guarded FakeDevice, bit for bit against ZeRO-2 on the CPU, every host <-> device byte accounted
// for). Here, the staging its collectives must do per step: the reduce-scatters read every unit's
// device gradient (4Ψ bytes down) and write this rank's device shard (4·S_r up); the in-place
// all_gather reads the shard (4·S_r down) and writes the device parameters (4Ψ up).
// And ZeRO-Offload (--offload optimizer): the same results with the gradient shard, the master
// shard and m, v on the host; device bytes lower by the closed form, measured per device.
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

// Offloaded: bit-identical to ZeRO-2 on the CPU (so to ZeRO-2 on the device, tested above). Its
// own copies: the master shard down once at construction (4·S_r), each step's updated shard up
// (4·S_r), and get_state's parameters down (4Ψ: m and v are gathered on the host). The staging:
// the reduce-scatters read the device unit gradients (4Ψ down) into the HOST shard (nothing up);
// the all_gather reads the device shard (4·S_r down) and writes the device parameters (4Ψ up).
TEST(Zero2Offload, EqualsZero2OnTheCpuWithTheOptimizerOnTheHost) {
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const ShardLayout shards(psi, test_world().size());
  const int64_t shard = shards.count[test_world().rank()];
  DirectCopies copies;
  copies.up = kSteps * 4 * shard;
  copies.down = 4 * shard + 4 * psi;
  const StagingStats st = expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        // The CPU reference is plain ZeRO-2; the device run offloads its optimizer.
        return std::make_unique<Zero2Strategy>(model, dp, opt, seed, MixedPrecisionConfig{}, 0.0,
                                               model.device() != Device::kCPU);
      },
      kSteps, copies);
  EXPECT_EQ(st.to_host_bytes, kSteps * 4 * (psi + shard));
  EXPECT_EQ(st.to_device_bytes, kSteps * 4 * psi);
}

// The device's model states drop by the host's 4⌈Ψ/N⌉ of gradients and 8⌈Ψ/N⌉ of m and v, and
// the host gains those plus the 4⌈Ψ/N⌉ master shard: measured by the MemoryTracker per device,
// ZeRO-2 on the device against ZeRO-Offload, each after one step; and the offloaded report's rows
// (per device, and the device gradients' peak) agree with their closed forms.
TEST(Zero2Offload, DeviceBytesDropByTheClosedForm) {
  const OffloadBytes b = measure_offload([](const GPT& model, ProcessGroup& dp, bool offload) {
    return std::make_unique<Zero2Strategy>(model, dp, AdamWConfig{}, 5, MixedPrecisionConfig{},
                                           0.0, offload);
  });
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const int64_t S = ShardLayout(psi, test_world().size()).padded;
  EXPECT_EQ(b.device[0], 4 * psi + 12 * S) << "ZeRO-2 on the device: 4Ψ + 4⌈Ψ/N⌉ + 8⌈Ψ/N⌉";
  EXPECT_EQ(b.device[1], 4 * psi) << "offloaded: the parameters only";
  EXPECT_EQ(b.host[0], 0);
  EXPECT_EQ(b.host[1], 16 * S) << "master, gradient, m and v shards";
}

// Resuming an offloaded stage from a checkpoint refreshes the host's master shard.
TEST(Zero2Offload, ResumesExactly) {
  expect_offload_resumes_exactly([](const GPT& model, ProcessGroup& dp, bool offload) {
    return std::make_unique<Zero2Strategy>(model, dp, AdamWConfig{}, 5, MixedPrecisionConfig{},
                                           0.0, offload);
  });
}

}  // namespace
}  // namespace llmp
