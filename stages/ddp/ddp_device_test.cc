// DDP with --device cuda's placement, at 2 ranks, without a GPU (tests/device_run.h: a guarded
// FakeDevice, bit for bit against DDP on the CPU, every host <-> device byte accounted for).
//
// Here, with small buckets (one per unit of tiny) and --grad_accum 2: the buckets are views of
// the device gradient buffer, each bucket's all_reduce_async is staged by the MPI backend through
// a host buffer of its own while backward goes on, and settled (copied up) by the test() or
// wait() that finds it done. The buckets partition the Ψ gradient elements, so the staging per
// step is what ONE all_reduce of the whole gradient must move, 4Ψ bytes down and 4Ψ up, whatever
// the number of buckets; the no_sync micro-step moves nothing. (launch() records no bucket sums
// on a device: a host read of a device bucket would die on the guarded page.)
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "stages/ddp/ddp.h"
#include "tests/device_run.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 3;

TEST(DDPOnDevice, EqualsDDPOnTheCpuWithEveryBucketStaged) {
  DDPOptions options;
  options.bucket_mb = 0.01;  // 10 KiB: every unit of tiny closes its own bucket
  options.grad_accum = 2;
  size_t buckets = 0;
  const StagingStats st = expect_device_run_equals_cpu(
      [&](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        auto s = std::make_unique<DDPStrategy>(model, dp, opt, seed, options);
        buckets = s->buckets().size();
        return s;
      },
      kSteps);
  EXPECT_GE(buckets, 3u) << "several buckets in flight, not one message";
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  EXPECT_EQ(st.to_host_bytes, kSteps * 4 * psi) << "the buckets' all_reduces: 4Ψ down per step";
  EXPECT_EQ(st.to_device_bytes, kSteps * 4 * psi) << "and 4Ψ up";
}

// Mixed precision on the device, with the same small buckets and --grad_accum 2: the 16-bit
// gradient buffer (the buckets are views of it) and parameters, the fp32 master copy, m and v on
// the FakeDevice; FlatGrads' rounding into the buckets, AdamW's mixed update and fp16's overflow
// check through the device's kernels. Bit-identical to the same precision on the CPU. Its own
// copy: the replicated master copy up once (4Ψ; the 16-bit parameters cross as 2Ψ, device_run.h).
// The buckets still partition the Ψ elements, now at 2 bytes each: 2Ψ down and 2Ψ up per step.
void expect_mixed_ddp_equals_cpu(TrainPrecision precision) {
  DDPOptions options;
  options.bucket_mb = 0.01;  // 10 KiB of 2-byte gradients: still one bucket per unit or so
  options.grad_accum = 2;
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  DirectCopies copies;
  copies.up = 4 * psi;
  MixedPrecisionConfig mp;
  mp.precision = precision;
  mp.scaler.scale = 1024.0f;  // fp16 only
  size_t buckets = 0;
  const StagingStats st = expect_device_run_equals_cpu(
      [&](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        auto s = std::make_unique<DDPStrategy>(model, dp, opt, seed, options, mp);
        buckets = s->buckets().size();
        return s;
      },
      kSteps, copies, precision);
  EXPECT_GE(buckets, 3u) << "several buckets in flight, not one message";
  EXPECT_EQ(st.to_host_bytes, kSteps * 2 * psi) << "the buckets' all_reduces: 2Ψ down per step";
  EXPECT_EQ(st.to_device_bytes, kSteps * 2 * psi) << "and 2Ψ up";
}

TEST(DDPOnDevice, Bf16EqualsDDPBf16OnTheCpu) { expect_mixed_ddp_equals_cpu(TrainPrecision::kBF16); }

// fp16 with an overflow injected at step 2 on rank 0 only: rank 1's gradients are summed with
// rank 0's inf, so every rank sees it after the all_reduce; skipped everywhere, as on the CPU.
TEST(DDPOnDevice, Fp16SkipsAnInjectedOverflowAsOnTheCpu) {
  const InjectedOverflow overflow(/*step=*/2, /*ranks=*/"0");
  expect_mixed_ddp_equals_cpu(TrainPrecision::kFP16);
}

// The constant buffer is host memory: refused by name on a device, before any training.
TEST(DDPOnDevice, RefusesTheConstantBuffer) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = GPT(GPTConfig::preset("tiny")).with_device(Device::kCUDA);
  DDPOptions options;
  options.constant_buffer_mb = 0.25;
  auto dp = test_world().duplicate();
  try {
    DDPStrategy s(model, *dp, AdamWConfig{}, 11, options);
    FAIL() << "a constant buffer was accepted on a device";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "DDPStrategy: the constant buffer is host memory; --device cuda runs without "
                 "--constant_buffer_mb");
  }
}

}  // namespace
}  // namespace llmp
