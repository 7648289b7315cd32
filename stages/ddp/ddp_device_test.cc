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
