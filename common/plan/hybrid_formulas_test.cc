// hybrid_formulas against numbers worked by hand for the tiny model (V = 256, ctx = T = 16,
// L = 2, C = 32, H = 2), where the stage cannot measure them on this machine (mixed precision,
// ZeRO-0 and ZeRO-2 terms, interleaved sends), and its one-line errors. What the stage does
// measure (fp32, ZeRO-1) is checked against the runs in stages/hybrid_3d's tests.
#include "common/plan/hybrid_formulas.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace llmp {
namespace {

const TpModelDims kTiny{256, 16, 2, 32, 2};

std::string error_of(const TpModelDims& d, const HybridShape& s, int64_t B, int64_t T) {
  try {
    hybrid_rank_plan(d, s, 0, B, T);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(HybridFormulas, ParametersPerStageByHand) {
  // Stage 0 of tp 2: wte rows 4096 + wpe 512 + one block 6448; stage 1: a block, ln_f 64, the
  // wte copy 4096 (the block: 1536+48 + 512+32 + 2048+64 + 2048+32 + 128).
  const auto plan = hybrid_plan(kTiny, {2, 2, 2, 3}, 12, 16);
  EXPECT_EQ(plan[0].psi_r, 11056);
  EXPECT_EQ(plan[1].psi_r, 10608);
  EXPECT_EQ(plan[0].shard, 5528);
  EXPECT_EQ(plan[0].psi_repl_r, 512 + 192);
  // Without a pipeline nobody keeps a wte copy: the whole tp slice, 4608 + 2·6448 + 64.
  EXPECT_EQ(hybrid_rank_plan(kTiny, {1, 1, 2, 1}, 0, 12, 16).psi_r, 17568);
}

TEST(HybridFormulas, DataParallelBytesForEachZeroStage) {
  // dp 4, Ψ_r = 11056: ring (dp-1)/dp·Ψ_r = 8292 elements.
  HybridShape s{4, 2, 2, 3};
  s.zero = 0;  // all_reduce of the gradients: 2·8292·4
  EXPECT_EQ(hybrid_rank_plan(kTiny, s, 0, 24, 16).dp, 66336);
  s.zero = 1;  // reduce_scatter + all_gather, 4 bytes each
  EXPECT_EQ(hybrid_rank_plan(kTiny, s, 0, 24, 16).dp, 66336);
  // ZeRO-2: a reduce_scatter per micro-batch (m = 3), one all_gather, except the tied wte's
  // holder (p = 2): the first stage's unit 0, D = V·C/t + ctx·C = 4096 + 512 = 4608 elements,
  // reduce-scattered once: 3/4·4·(3·(11056 - 4608) + 4608) + 3/4·4·11056 = 71856 + 33168.
  s.zero = 2;
  const HybridRankPlan z2 = hybrid_rank_plan(kTiny, s, 0, 24, 16);
  EXPECT_EQ(z2.dp, 105024);
  EXPECT_EQ(z2.dp_calls, 5) << "3 micro-batch buckets, the deferred unit, the all_gather";
  EXPECT_EQ(z2.grads, 4 * 2764) << "gradients sharded: ⌈11056/4⌉ floats";
  // Without a pipeline nothing is deferred: 3/4·4·(3·Ψ_r + Ψ_r) with Ψ_r = 17568 (unit 0, both
  // blocks, ln_f: the whole tp slice), and m + 1 calls.
  const HybridRankPlan flat = hybrid_rank_plan(kTiny, {4, 1, 2, 3, 1, false, 2}, 0, 24, 16);
  EXPECT_EQ(flat.dp, 3.0 * 4 * 17568);
  EXPECT_EQ(flat.dp_calls, 4);
}

TEST(HybridFormulas, MixedPrecisionHalvesParameterAndActivationBytes) {
  // bf16: parameters 2 bytes, gradients fp32 (main_grad), optimizer K = 12 on the shard,
  // activations 2 bytes.
  const HybridRankPlan f = hybrid_rank_plan(kTiny, {2, 2, 2, 3}, 0, 12, 16);
  const HybridRankPlan h =
      hybrid_rank_plan(kTiny, {2, 2, 2, 3}, 0, 12, 16, HybridPrecision::mixed());
  EXPECT_EQ(h.params, 2 * 11056);
  EXPECT_EQ(h.grads, 4 * 11056);
  EXPECT_EQ(h.optimizer, 12 * 5528);
  EXPECT_EQ(h.pp, f.pp / 2);
  EXPECT_EQ(h.emb, f.emb) << "the wte pair sums fp32 gradients";
  // dp: the fp32 reduce_scatter (1/2·4Ψ_r) and the 16-bit all_gather (1/2·2Ψ_r).
  EXPECT_EQ(h.dp, 0.5 * 6 * 11056);
  // The tp bytes: activations halve, the cross-entropy's fp32 reductions do not (none on stage 0).
  EXPECT_EQ(h.tp, f.tp / 2);
}

TEST(HybridFormulas, InterleavedSendsByHand) {
  // p = 2, v = 2, L = 4: rank 0 holds virtual stages 0 and 2, rank 1 stages 1 and 3. Per
  // micro-batch rank 0 sends forward from 0 and 2, backward from 2 (not from 0): 3; rank 1
  // forward from 1, backward from 1 and 3: 3. m = 2.
  const TpModelDims d{256, 16, 4, 32, 2};
  const auto plan = hybrid_plan(d, {1, 2, 1, 2, 2}, 4, 16);
  EXPECT_EQ(plan[0].sends, 6);
  EXPECT_EQ(plan[1].sends, 6);
  EXPECT_EQ(plan[0].pp, 6 * 4.0 * 2 * 16 * 32);
}

TEST(HybridFormulas, ErrorsNameTheValues) {
  EXPECT_EQ(error_of(kTiny, {1, 1, 3, 1}, 12, 16),
            "tensor-parallel size 3 does not divide H=2, 4C=128 and V=256");
  EXPECT_EQ(error_of(kTiny, {1, 4, 1, 1}, 12, 16), "layers 2 not divisible by p·v = 4 (p=4, v=1)");
  EXPECT_EQ(error_of(kTiny, {2, 1, 1, 4}, 12, 16),
            "global batch 12 is not divisible by dp·m = 8 (dp=2, m=4)");
  HybridShape sp{1, 1, 2, 1};
  sp.sp = true;
  EXPECT_EQ(error_of(kTiny, sp, 12, 15),
            "sequence length T=15 is not divisible by tp 2 (sequence parallelism)");
  EXPECT_THROW(hybrid_rank_plan(kTiny, {1, 2, 1, 1}, 2, 1, 16), std::invalid_argument)
      << "pipeline rank 2 of p = 2";
}

}  // namespace
}  // namespace llmp
