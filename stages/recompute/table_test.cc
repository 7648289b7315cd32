// The recomputation table's claims, from what the walks measured (table.h): without
// recomputation the activation peak grows by one block's whole cache per block (O(L)); with full
// recomputation by one block input per block; with segments of √L blocks it grows like √L
// (16 blocks cost less than twice 4 blocks, where none costs over three times); the recomputed
// FLOPs equal the formula. No timing is asserted (a benchmark prints it). On a device (here a
// guarded FakeDevice with kernels/cpu as its kernels: common/testing/fake_kernel_ops.h) the same
// table is measured in device bytes, and ZeRO-R's Pa+cpu row's device peak does not grow with L.
#include "stages/recompute/table.h"

#include <gtest/gtest.h>

#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"

#include <cstdio>
#include <vector>

namespace llmp {
namespace {

TEST(RecomputeTable, PeakGrowsLikeLThenLikeSqrtLThenByOneInputPerBlock) {
  const int B = 4;
  const std::vector<RecomputeRun> runs = recompute_table({4, 9, 16}, B, /*timed=*/0);
  std::printf("%s", recompute_markdown(runs).c_str());
  ASSERT_EQ(runs.size(), 12u);
  auto row = [&](int i, int p) { return runs[4 * i + p]; };  // p: none, √L, full, selective
  const int64_t x = int64_t{B} * 16 * 32 * 4;                  // one block input (B,T,C), fp32
  const RecomputeRun one = measure_recompute(1, Recompute::kNone, 1, B, 0);
  const double block = one.kept_per_block;                     // one block's cache and output
  EXPECT_EQ(row(1, 0).peak_bytes - row(0, 0).peak_bytes, 5 * block) << "none: O(L)";
  EXPECT_EQ(row(2, 0).peak_bytes - row(1, 0).peak_bytes, 7 * block);
  EXPECT_EQ(row(1, 2).peak_bytes - row(0, 2).peak_bytes, 5 * x) << "full: one input per block";
  EXPECT_EQ(row(2, 2).peak_bytes - row(1, 2).peak_bytes, 7 * x);
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(row(i, 2).peak_bytes, row(i, 1).peak_bytes);
    EXPECT_LT(row(i, 1).peak_bytes, row(i, 0).peak_bytes);
    EXPECT_LT(row(i, 3).peak_bytes, row(i, 0).peak_bytes) << "selective drops the probabilities";
    for (int p = 0; p < 4; ++p) {
      EXPECT_EQ(static_cast<double>(row(i, p).recomputed_flops), row(i, p).formula_flops);
      EXPECT_EQ(row(i, p).walk_flops, row(i, 0).walk_flops + row(i, p).recomputed_flops)
          << "a walk's FLOPs are none's plus what was recomputed";
    }
  }
  EXPECT_LT(row(2, 1).peak_bytes, 2 * row(0, 1).peak_bytes) << "√L: 4× the blocks, < 2× the peak";
  EXPECT_GT(row(2, 0).peak_bytes, 3 * row(0, 0).peak_bytes) << "none: 4× the blocks, > 3×";
}

// --device cuda's table, on a device with the CPU's kernels: every row measures what the CPU's
// measured, now in device bytes (a walk that left an activation on the host would show a lower
// peak, and a guarded FakeDevice ends any host read of device memory), plus at most the one id
// array (B·T int32) the kernels read on the device while the peak stands (the CPU reads the
// caller's; ids_on, common/tensor/tensor.h: counted as activations); the extra Pa+cpu row keeps
// no checkpoint on the device, so its peak is the same at every L, below full's, and the walk
// copied one block input (B,T,C) per block down.
TEST(RecomputeTable, OnADeviceMeasuresDeviceBytesAndPaCpuKeepsNoCheckpointThere) {
  const int B = 4;
  const std::vector<int> layers = {4, 9};
  const std::vector<RecomputeRun> cpu = recompute_table(layers, B, /*timed=*/0);
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const std::vector<RecomputeRun> gpu = recompute_table(layers, B, /*timed=*/1, Device::kCUDA);
  std::printf("%s", recompute_markdown(gpu).c_str());
  ASSERT_EQ(gpu.size(), 10u) << "none, full every √L, full, selective and full with Pa+cpu per L";
  const int64_t x = int64_t{B} * 16 * 32 * 4;  // one block input (B,T,C), fp32
  const int64_t ids = int64_t{B} * 16 * 4;     // one id array (B,T) int32
  for (int i = 0; i < 2; ++i) {
    for (int p = 0; p < 4; ++p) {
      const RecomputeRun &c = cpu[4 * i + p], &g = gpu[5 * i + p];
      EXPECT_EQ(g.device, Device::kCUDA);
      EXPECT_TRUE(g.peak_bytes == c.peak_bytes || g.peak_bytes == c.peak_bytes + ids)
          << "L " << c.L << " policy " << p << ": " << g.peak_bytes << " on the device, "
          << c.peak_bytes << " on the CPU";
      EXPECT_EQ(g.kept_per_block, c.kept_per_block) << "L " << c.L << " policy " << p;
      EXPECT_EQ(g.recomputed_flops, c.recomputed_flops) << "L " << c.L << " policy " << p;
      EXPECT_EQ(g.walk_flops, c.walk_flops) << "L " << c.L << " policy " << p;
      EXPECT_EQ(g.checkpoint_bytes_down, 0);
    }
    const RecomputeRun &full = gpu[5 * i + 2], &pa_cpu = gpu[5 * i + 4];
    EXPECT_TRUE(pa_cpu.cpu_checkpoints);
    EXPECT_EQ(pa_cpu.checkpoint_bytes_down, layers[i] * x) << "one block input per block";
    EXPECT_LT(pa_cpu.peak_bytes, full.peak_bytes);
    EXPECT_EQ(pa_cpu.walk_flops, full.walk_flops) << "the same recomputation";
    EXPECT_GT(pa_cpu.ms, 0.0) << "the timed walk ran";
  }
  EXPECT_EQ(gpu[9].peak_bytes, gpu[4].peak_bytes) << "Pa+cpu: the device peak does not grow with L";
  EXPECT_EQ(gpu[7].peak_bytes - gpu[2].peak_bytes, 5 * x) << "full: one input per block on it";
}

}  // namespace
}  // namespace llmp
