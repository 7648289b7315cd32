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

std::unique_ptr<Strategy> zero2(const GPT& model, ProcessGroup& dp, AdamWConfig opt,
                                uint64_t seed, const MixedPrecisionConfig& mp) {
  return std::make_unique<Zero2Strategy>(model, dp, opt, seed, mp);
}

TEST(Zero2OnDevice, EqualsZero2OnTheCpuWithTheCollectivesStaged) {
  expect_sharded_run_equals_cpu(zero2, kSteps, TrainPrecision::kFP32);
}

// Mixed precision on the device: the 16-bit parameters and gradient shard, the fp32 master
// shard, m and v on the FakeDevice, the rounding, update and fp16's overflow check through the
// device's kernels. Bit-identical to the same precision on the CPU, the staging at 2 bytes per
// element.
TEST(Zero2OnDevice, Bf16EqualsZero2Bf16OnTheCpu) {
  expect_sharded_run_equals_cpu(zero2, kSteps, TrainPrecision::kBF16);
}

// fp16 with an overflow injected at step 2 on rank 0 only: skipped on every rank, on the device as
// on the CPU. Rank 1's shard is NOT clean: the reduce-scatter sums rank 0's inf into it (a rank
// deciding on its own shard skips here too; Zero3Offload.Fp16InfInOneRanksHostShardSkipsOnEveryRank
// sets one rank's shard by hand for that).
TEST(Zero2OnDevice, Fp16SkipsAnOverflowOnOneRankOnEveryRankAsOnTheCpu) {
  const InjectedOverflow overflow(/*step=*/2, /*ranks=*/"0");
  expect_sharded_run_equals_cpu(zero2, kSteps, TrainPrecision::kFP16);
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

// ZeRO-Offload in 16 bits (the paper's setting, common/train/offload.h): bit-identical to ZeRO-2
// in the same precision on the CPU (the same 16-bit reduce-scatter and mixed AdamW kernel on the
// same values). Its own copies: the 16-bit parameters up at the start (2Ψ), each applied step's
// updated shard rounded on the host and copied up in 16 bits (2·S_r), nothing down (the fp32
// master is initialised on the host; get_state gathers the host's master, m and v). The
// staging: the reduce-scatters read the device's 16-bit unit gradients (2Ψ down) into the HOST
// 16-bit shard (nothing up); the all_gather reads the device shard (2·S_r down) and writes the
// device parameters (2Ψ up). `applied`: the steps not skipped.
void expect_mixed_offload_equals_zero2_on_the_cpu(TrainPrecision precision, int applied) {
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const ShardLayout shards(psi, test_world().size());
  const int64_t shard = shards.count[test_world().rank()];
  DirectCopies copies;
  copies.up = applied * 2 * shard;
  copies.down = 0;
  MixedPrecisionConfig mp;
  mp.precision = precision;
  mp.scaler.scale = 1024.0f;  // fp16 only
  const StagingStats st = expect_device_run_equals_cpu(
      [mp](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<Zero2Strategy>(model, dp, opt, seed, mp, 0.0,
                                               model.device() != Device::kCPU);
      },
      kSteps, copies, precision);
  EXPECT_EQ(st.to_host_bytes, kSteps * 2 * (psi + shard));
  EXPECT_EQ(st.to_device_bytes, kSteps * 2 * psi);
}

TEST(Zero2Offload, Bf16EqualsZero2Bf16OnTheCpuWith16BitCopies) {
  expect_mixed_offload_equals_zero2_on_the_cpu(TrainPrecision::kBF16, kSteps);
}

// fp16, an overflow injected at step 2 on rank 0 only: the host shard's check, agreed over the
// ranks, skips the step on both (as ZeRO-2 on the CPU does), and nothing is copied up for it.
TEST(Zero2Offload, Fp16SkipsAnOverflowOnOneRankOnEveryRank) {
  const InjectedOverflow overflow(/*step=*/2, /*ranks=*/"0");
  expect_mixed_offload_equals_zero2_on_the_cpu(TrainPrecision::kFP16, kSteps - 1);
}

// In bf16 the device keeps only the 16-bit parameters: 2Ψ + 2⌈Ψ/N⌉ + 12⌈Ψ/N⌉ -> 2Ψ, the host
// 2⌈Ψ/N⌉ of 16-bit gradients and 12⌈Ψ/N⌉ of fp32 master, m and v; the report's rows agree.
TEST(Zero2Offload, Bf16DeviceBytesDropByTheClosedForm) {
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  const OffloadBytes b = measure_offload(
      [mp](const GPT& model, ProcessGroup& dp, bool offload) {
        return std::make_unique<Zero2Strategy>(model, dp, AdamWConfig{}, 5, mp, 0.0, offload);
      },
      TrainPrecision::kBF16);
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const int64_t S = ShardLayout(psi, test_world().size()).padded;
  EXPECT_EQ(b.device[0], 2 * psi + 14 * S) << "ZeRO-2 bf16 on the device: 2Ψ + 2⌈Ψ/N⌉ + 12⌈Ψ/N⌉";
  EXPECT_EQ(b.device[1], 2 * psi) << "offloaded: the 16-bit parameters only";
  EXPECT_EQ(b.host[0], 0);
  EXPECT_EQ(b.host[1], 14 * S) << "16-bit gradient shard; fp32 master, m and v";
}

TEST(Zero2Offload, Bf16ResumesExactly) {
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  expect_offload_resumes_exactly(
      [mp](const GPT& model, ProcessGroup& dp, bool offload) {
        return std::make_unique<Zero2Strategy>(model, dp, AdamWConfig{}, 5, mp, 0.0, offload);
      },
      TrainPrecision::kBF16);
}

}  // namespace
}  // namespace llmp
