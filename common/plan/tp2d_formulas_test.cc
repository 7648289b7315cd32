// tp2d_formulas against numbers worked by hand for the tiny preset (V=256, ctx=16, L=2, C=32,
// H=2), B = 12, T = 16.
#include "common/plan/tp2d_formulas.h"

#include <gtest/gtest.h>

namespace llmp {
namespace {

const TpModelDims kTiny{256, 16, 2, 32, 2};

TEST(Tp2dFormulas, ParametersPerRank) {
  // q = 1: the whole model, Ψ = (V + ctx)·C + L(12C² + 13C) + 2C = 8704 + 2·12,704 + 64 = 34,176.
  EXPECT_DOUBLE_EQ(tp2d_params_per_rank(kTiny, 1), 34176);
  // q = 2: Ψ_vec = (512 + 832 + 64)/2 = 704; Ψ_mat = (8192 + 24,576)/4 = 8192; 8896.
  EXPECT_DOUBLE_EQ(tp2d_vector_params(kTiny, 2), 704);
  EXPECT_DOUBLE_EQ(tp2d_params_per_rank(kTiny, 2), 8896);
}

TEST(Tp2dFormulas, ActivationsPerBlock) {
  // q = 2, d = 1: Bl = 6, N = 96: 15·96·16 + 4·96 + 6·2·256/2 = 23,040 + 384 + 1536 = 24,960
  // floats, 99,840 bytes.
  EXPECT_DOUBLE_EQ(tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 1), 99840);
  // q = 2, d = 2: Bl = 3, N = 48: 11,520 + 192 + 768 = 12,480 floats.
  EXPECT_DOUBLE_EQ(tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 2), 49920);
}

TEST(Tp2dFormulas, ActivationsPerBlockUnderRecomputation) {
  // q = 2, d = 1, N = 96. Selective: P's 1536 floats go, 15·96·16 + 4·96 = 23,424 floats.
  EXPECT_DOUBLE_EQ(
      tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 1, Recompute::kSelective), 93696);
  // Full: the checkpoints, N·Cl = 96·16 floats each; k = 1: one per block, 6144 bytes.
  EXPECT_DOUBLE_EQ(tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 1, Recompute::kFull, 1),
                   6144);
  // k = 2 and k = 3: ⌈2/k⌉ = 1 checkpoint over L = 2 blocks, 3072 per block.
  EXPECT_DOUBLE_EQ(tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 1, Recompute::kFull, 2),
                   3072);
  EXPECT_DOUBLE_EQ(tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 1, Recompute::kFull, 3),
                   3072);
  // d = 2: N = 48, half of everything.
  EXPECT_DOUBLE_EQ(tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 2, Recompute::kFull, 1),
                   3072);
}

TEST(Tp2dFormulas, ActivationsPerBlockWithFlashAttention) {
  // q = 2, d = 1, N = 96: P's 6·1·256 = 1536 floats become lse's 96 (N·H/q):
  // 23,040 + 384 + 96 = 23,520 floats. Selective has no P to drop: the same.
  EXPECT_DOUBLE_EQ(
      tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 1, Recompute::kNone, 1, true), 94080);
  EXPECT_DOUBLE_EQ(
      tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 1, Recompute::kSelective, 1, true), 94080);
  // Full keeps the checkpoints only, whatever the attention.
  EXPECT_DOUBLE_EQ(
      tp2d_activation_bytes_per_block(kTiny, 12, 16, 2, 1, Recompute::kFull, 1, true), 6144);
}

TEST(Tp2dFormulas, FullRecomputationSendsTheForwardsAgain) {
  // q = 2, d = 1, N = 96. Row: 2·(28·96·32 + 1·16·96) = 2·(86,016 + 1536) = 175,104.
  EXPECT_DOUBLE_EQ(tp2d_recompute_row_bytes_per_step(kTiny, 12, 16, 2, 1), 175104);
  // d = 2: N = 48, 87,552. Column: 2·48·1024/2 = 49,152 whatever d.
  EXPECT_DOUBLE_EQ(tp2d_recompute_row_bytes_per_step(kTiny, 12, 16, 2, 2), 87552);
  EXPECT_DOUBLE_EQ(tp2d_recompute_column_bytes_per_step(kTiny, 2), 49152);
  // Calls: 2·(8·2 + 4) = 40; q = 1: 2·12 = 24 (groups of one rank count too). No bytes at q = 1.
  EXPECT_DOUBLE_EQ(tp2d_recompute_calls_per_step(kTiny, 2), 40);
  EXPECT_DOUBLE_EQ(tp2d_recompute_calls_per_step(kTiny, 1), 24);
  EXPECT_DOUBLE_EQ(tp2d_recompute_row_bytes_per_step(kTiny, 12, 16, 1, 1), 0);
  EXPECT_DOUBLE_EQ(tp2d_recompute_column_bytes_per_step(kTiny, 1), 0);
}

TEST(Tp2dFormulas, BytesPerStepPerGroup) {
  // q = 2, d = 1, N = 96. Row: 2·84·96·32 = 516,096; 12·96·256 = 294,912; LayerNorms
  // 5·1·16·96 = 7680; cross-entropy 1·12·96 = 1152: 819,840.
  EXPECT_DOUBLE_EQ(tp2d_row_bytes_per_step(kTiny, 12, 16, 2, 1), 819840);
  // Column: 2·144·1024/2 = 147,456; 12·256·32/2 = 49,152; embedding 1·4·96·32 = 12,288; loss 8;
  // vectors 1·4·704 = 2816: 211,720.
  EXPECT_DOUBLE_EQ(tp2d_column_bytes_per_step(kTiny, 12, 16, 2, 1), 211720);
  EXPECT_DOUBLE_EQ(tp2d_depth_bytes_per_step(kTiny, 2, 1), 0);
  // d = 2: N = 48. Row: 258,048 + 147,456 + 3840 + 576 = 409,920. Depth: 1·(8 + 4·8896).
  EXPECT_DOUBLE_EQ(tp2d_row_bytes_per_step(kTiny, 12, 16, 2, 2), 409920);
  EXPECT_DOUBLE_EQ(tp2d_column_bytes_per_step(kTiny, 12, 16, 2, 2), 205576);
  EXPECT_DOUBLE_EQ(tp2d_depth_bytes_per_step(kTiny, 2, 2), 35592);
  // q = 1: no row or column traffic.
  EXPECT_DOUBLE_EQ(tp2d_row_bytes_per_step(kTiny, 12, 16, 1, 2), 0);
  EXPECT_DOUBLE_EQ(tp2d_column_bytes_per_step(kTiny, 12, 16, 1, 2), 0);
}

TEST(Tp2dFormulas, CollectiveCalls) {
  // q = 2, L = 2: row 27·2 + 15 + 2 = 71, column 54 + 4 = 58, depth 2: 131.
  EXPECT_DOUBLE_EQ(tp2d_calls_per_step(kTiny, 2), 131);
  // q = 1: 27 + 17 + 27 + 4 + 2 = 77.
  EXPECT_DOUBLE_EQ(tp2d_calls_per_step(kTiny, 1), 77);
}

}  // namespace
}  // namespace llmp
