#include "common/plan/memory_planner.h"

#include <gtest/gtest.h>

namespace llmp {
namespace {

// Table 1 of the ZeRO paper: Ψ = 7.5B, K = 12, per-device memory in GB (1e9 bytes).
TEST(MemoryPlanner, ReproducesZeroPaperTable1) {
  const double psi = 7.5e9, GB = 1e9;
  const Precision mp = Precision::mixed_adam();
  struct Row { int n; double pos, posg, posgp; };
  // Columns of Table 1 (baseline is 120 GB for every N_d).
  const Row rows[] = {{1, 120, 120, 120},       {4, 52.5, 41.3, 30},
                      {16, 35.6, 21.6, 7.5},    {64, 31.4, 16.6, 1.88},
                      {256, 30.4, 15.4, 0.469}, {1024, 30.1, 15.1, 0.117}};
  for (const Row& r : rows) {
    EXPECT_NEAR(plan_memory(DPStage::kDDP, psi, r.n, mp).total() / GB, 120.0, 1e-9);
    EXPECT_NEAR(plan_memory(DPStage::kZeRO1, psi, r.n, mp).total() / GB, r.pos, 0.051) << r.n;
    EXPECT_NEAR(plan_memory(DPStage::kZeRO2, psi, r.n, mp).total() / GB, r.posg, 0.051) << r.n;
    EXPECT_NEAR(plan_memory(DPStage::kZeRO3, psi, r.n, mp).total() / GB, r.posgp, 0.0051) << r.n;
  }
}

TEST(MemoryPlanner, PaddedShardsRoundUp) {
  EXPECT_EQ(shard_size(10, 4), 3);
  EXPECT_EQ(shard_size(12, 4), 3);
  const MemoryPlan z2 = plan_memory(DPStage::kZeRO2, 10, 4, Precision::fp32(), /*padded=*/true);
  EXPECT_EQ(z2.params, 40);     // 4Ψ, replicated
  EXPECT_EQ(z2.grads, 12);      // 4·⌈Ψ/N⌉
  EXPECT_EQ(z2.optimizer, 24);  // 8·⌈Ψ/N⌉
}

TEST(MemoryPlanner, TrafficZero3IsOneAndAHalfTimesDDP) {
  const double ddp = plan_bytes_per_step(DPStage::kDDP, 1000, 4, 4);
  EXPECT_DOUBLE_EQ(ddp, 2.0 * 3 / 4 * 1000 * 4);
  EXPECT_DOUBLE_EQ(plan_bytes_per_step(DPStage::kZeRO2, 1000, 4, 4), ddp);
  EXPECT_DOUBLE_EQ(plan_bytes_per_step(DPStage::kZeRO3, 1000, 4, 4), 1.5 * ddp);
  EXPECT_EQ(plan_bytes_per_step(DPStage::kZeRO2, 1000, 1, 4), 0.0);
}

}  // namespace
}  // namespace llmp
