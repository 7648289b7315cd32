// The cost model on small cases worked by hand (the numbers in the comments are the hand work;
// the code under test is not used to produce them).
//
// The model of every case: L 2, C 4, H 2, V 8, T 4 (ctx 4), fp32 unless named.
//   Ψ = V·C + ctx·C + L·(12C² + 13C) + 2C = 32 + 16 + 2·(192 + 52) + 8 = 544
//   block forward per sequence 24·T·C² + 4·T²·C = 1536 + 256 = 1792 FLOPs; ×3 with backward 5376
//   head per sequence 6·T·C·V = 768
#include <gtest/gtest.h>

#include "tools/plan/cost_model.h"

namespace llmp::plan {
namespace {

ModelSpec toy() {
  ModelSpec m;
  m.L = 2, m.C = 4, m.H = 2, m.V = 8, m.T = 4, m.ctx = 4;
  return m;
}

Cluster cluster(int G, int nodes) {
  Cluster c;
  c.gpus_per_node = G, c.nodes = nodes;
  c.memory = 1e12, c.peak_flops = 1e6, c.efficiency = 0.5;  // 5e5 FLOP/s achieved
  c.bw_intra = 1000, c.bw_inter = 100, c.latency = 0.001;
  return c;
}

PlanConfig config(int dp, int pp, int tp, int m, int zero = 0) {
  PlanConfig c;
  c.mixed = false;
  c.shape.dp = dp, c.shape.pp = pp, c.shape.tp = tp, c.shape.m = m, c.shape.zero = zero;
  return c;
}

TEST(CostModel, ParamsAndModelFlops) {
  EXPECT_DOUBLE_EQ(toy().params(), 544);
  // 72·B·T·L·C²·(1 + T/6C + V/12LC) = 72·2·4·2·16·(1 + 1/6 + 1/12) = 18432·1.25
  EXPECT_DOUBLE_EQ(model_flops(toy(), 2), 23040);
}

TEST(CostModel, OneGpuComputeAndMemory) {
  // B = 2, m = 2: b = 1. FLOPs 2·(2·5376 + 768) = 23040; at 5e5 FLOP/s 0.04608 s.
  const PlanCost c = evaluate(toy(), 2, cluster(8, 1), config(1, 1, 1, 2));
  ASSERT_EQ(c.ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(c.ranks[0].flops, 23040);
  EXPECT_NEAR(c.step, 0.04608, 1e-12);
  EXPECT_NEAR(c.mfu, 23040 / (0.04608 * 1e6), 1e-12);  // = efficiency, nothing else costs
  // Memory: parameters 4·544 = 2176, gradients 2176, Adam 8·544 = 4352; activations, one
  // micro-batch in flight, 2 blocks × [sbh(64 + 4as/h) + 16sb] = 2·(16·(64 + 8) + 64) = 2432;
  // logits 4·b·T·V = 128. Total 11264.
  EXPECT_EQ(c.ranks[0].in_flight, 1);
  EXPECT_DOUBLE_EQ(c.ranks[0].plan.params, 2176);
  EXPECT_DOUBLE_EQ(c.ranks[0].plan.optimizer, 4352);
  EXPECT_DOUBLE_EQ(c.ranks[0].activations, 2432);
  EXPECT_DOUBLE_EQ(c.ranks[0].logits, 128);
  EXPECT_DOUBLE_EQ(c.memory, 11264);
  EXPECT_TRUE(c.fits);
  Cluster small = cluster(8, 1);
  small.memory = 11263;
  EXPECT_FALSE(evaluate(toy(), 2, small, config(1, 1, 1, 2)).fits);
}

TEST(CostModel, DataParallelAllReduceIntraAndInterNode) {
  // dp = 2, ZeRO-0: all_reduce of 4·544 bytes of gradients: 2·(1/2)·2176 = 2176 bytes sent,
  // ring steps 2(n-1) = 2. Intra-node (1000 B/s): 2.176 + 2·0.001; inter-node (100 B/s): 21.76 +
  // 0.002. Compute: B/dp = 1 sequence, 11520 FLOPs, 0.02304 s.
  const PlanCost intra = evaluate(toy(), 2, cluster(8, 1), config(2, 1, 1, 1));
  EXPECT_FALSE(intra.placement.dp);
  EXPECT_NEAR(intra.t_dp, 2.178, 1e-9);
  EXPECT_NEAR(intra.t_compute, 0.02304, 1e-12);
  EXPECT_NEAR(intra.step, 2.178 + 0.02304, 1e-9);
  const PlanCost inter = evaluate(toy(), 2, cluster(1, 2), config(2, 1, 1, 1));
  EXPECT_TRUE(inter.placement.dp);
  EXPECT_NEAR(inter.t_dp, 21.762, 1e-9);
}

TEST(CostModel, PipelineBubbleOnTheSlowestStage) {
  // pp = 2, m = 2, B = 2 (b = 1), communication free. Rank 0: 1 block × 2 sequences = 10752
  // FLOPs; rank 1 adds the head 2·768: 12288 FLOPs = 0.024576 s, the slowest stage. The bubble is
  // (p-1)/(v·m) = 1/2 of it: 0.012288 s; the step 0.036864 s (no dp; the embedding all_reduce is
  // made free by the bandwidth and a zero latency).
  Cluster cl = cluster(8, 1);
  cl.bw_intra = cl.bw_inter = 1e30, cl.latency = 0;
  const PlanCost c = evaluate(toy(), 2, cl, config(1, 2, 1, 2));
  ASSERT_EQ(c.ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(c.ranks[0].flops, 10752);
  EXPECT_DOUBLE_EQ(c.ranks[1].flops, 12288);
  EXPECT_NEAR(c.bubble, 0.012288, 1e-12);
  EXPECT_NEAR(c.step, 0.036864, 1e-12);
  // 1F1B in flight: rank 0 min(m, p) = 2 micro-batches, rank 1 one.
  EXPECT_EQ(c.ranks[0].in_flight, 2);
  EXPECT_EQ(c.ranks[1].in_flight, 1);
}

TEST(CostModel, InFlightMicroBatches) {
  EXPECT_EQ(in_flight(4, 8, 1, 0), 4);  // min(m, p - r)
  EXPECT_EQ(in_flight(4, 8, 1, 3), 1);
  EXPECT_EQ(in_flight(4, 2, 1, 0), 2);
  EXPECT_EQ(in_flight(4, 8, 2, 0), 11);  // interleaved: 2(p-r-1) + (v-1)p + 1 = 6 + 4 + 1
  EXPECT_EQ(in_flight(4, 4, 2, 3), 5);   // 0 + 4 + 1
  EXPECT_EQ(in_flight(2, 2, 2, 0), 4);   // 2 + 2 + 1 = 5 capped at m·v = 4
}

TEST(CostModel, RecomputationFlops) {
  // Full: one more forward per block, 2 blocks × 2 seqs × 1792 = 7168 over 23040;
  // selective: QKᵀ again, 2·T²·C = 128 per block and sequence: 512.
  PlanConfig full = config(1, 1, 1, 1), sel = config(1, 1, 1, 1);
  full.shape.recompute = Recompute::kFull, sel.shape.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(evaluate(toy(), 2, cluster(8, 1), full).ranks[0].flops, 30208);
  EXPECT_DOUBLE_EQ(evaluate(toy(), 2, cluster(8, 1), sel).ranks[0].flops, 23552);
  EXPECT_DOUBLE_EQ(evaluate(toy(), 2, cluster(8, 1), full).hardware_flops, 30208);
}

TEST(CostModel, ZeroThreeShardsParametersAndGathersPerMicroBatch) {
  // dp = 2, ZeRO-3, m = 1, fp32: parameters 4·⌈544/2⌉ = 1088 bytes; gradients and Adam sharded:
  // 1088 and 2176. dp bytes: m·(1/2)·544·(2·4 + 4) = 3264 (all_gather forward and backward,
  // reduce_scatter), 3 calls of n-1 = 1 ring step each: at 1000 B/s, 3.264 + 3·0.001 s.
  const PlanCost c = evaluate(toy(), 2, cluster(8, 1), config(2, 1, 1, 1, 3));
  EXPECT_DOUBLE_EQ(c.ranks[0].plan.params, 1088);
  EXPECT_DOUBLE_EQ(c.ranks[0].plan.grads, 1088);
  EXPECT_DOUBLE_EQ(c.ranks[0].plan.optimizer, 2176);
  EXPECT_DOUBLE_EQ(c.ranks[0].plan.dp, 3264);
  EXPECT_NEAR(c.t_dp, 3.267, 1e-9);
}

TEST(CostModel, BadConfigurationsThrow) {
  EXPECT_THROW(evaluate(toy(), 2, cluster(8, 1), config(1, 1, 1, 1, 4)), std::invalid_argument);
  EXPECT_THROW(evaluate(toy(), 2, cluster(8, 1), config(1, 1, 3, 1)), std::invalid_argument);
  PlanConfig il = config(1, 2, 1, 1);  // interleaved needs pp | m
  il.shape.v = 1;
  EXPECT_NO_THROW(evaluate(toy(), 2, cluster(8, 1), il));
  ModelSpec deep = toy();
  deep.L = 4;
  il.shape.v = 2;
  EXPECT_THROW(evaluate(deep, 2, cluster(8, 1), il), std::invalid_argument);
}

}  // namespace
}  // namespace llmp::plan
