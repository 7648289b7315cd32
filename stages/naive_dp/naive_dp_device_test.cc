// Naive DP with --device cuda's placement, at 2 ranks, without a GPU (tests/device_run.h: a
// guarded FakeDevice, bit for bit against naive DP on the CPU, every host <-> device byte
// accounted for). Here, the staging its one collective must do: one all_reduce of the Ψ-float
// gradient per step, 4Ψ bytes down and 4Ψ up, nothing else (bf16: 2Ψ each way).
#include <gtest/gtest.h>

#include <memory>

#include "stages/naive_dp/naive_dp.h"
#include "tests/device_run.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 3;

TEST(NaiveDPOnDevice, EqualsNaiveDPOnTheCpuWithTheAllReduceStaged) {
  const StagingStats st = expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<NaiveDPStrategy>(model, dp, opt, seed);
      },
      kSteps);
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  EXPECT_EQ(st.to_host_bytes, kSteps * 4 * psi) << "one all_reduce of 4Ψ bytes per step, staged";
  EXPECT_EQ(st.to_device_bytes, kSteps * 4 * psi);
}

// bf16 on the device: the 16-bit gradient buffer all-reduced (2Ψ down and 2Ψ up per step), the
// fp32 master copy on the device (its own copy: 4Ψ up once), bit-identical to bf16 on the CPU.
TEST(NaiveDPOnDevice, Bf16EqualsNaiveDPBf16OnTheCpu) {
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  DirectCopies copies;
  copies.up = 4 * psi;
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  const StagingStats st = expect_device_run_equals_cpu(
      [mp](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<NaiveDPStrategy>(model, dp, opt, seed, mp);
      },
      kSteps, copies, TrainPrecision::kBF16);
  EXPECT_EQ(st.to_host_bytes, kSteps * 2 * psi) << "one all_reduce of 2Ψ bytes per step, staged";
  EXPECT_EQ(st.to_device_bytes, kSteps * 2 * psi);
}

}  // namespace
}  // namespace llmp
