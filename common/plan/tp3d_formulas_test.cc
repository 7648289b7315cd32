// tp3d_formulas against numbers worked by hand for the tiny model (V=256, ctx=16, L=2, C=32,
// H=2) with B=16, T=16 at q = 2 (P = 8) and q = 1.
#include "common/plan/tp3d_formulas.h"

#include <gtest/gtest.h>

namespace llmp {
namespace {

const Tp3dDims kTiny{256, 16, 2, 32, 2};

TEST(Tp3dFormulas, ParametersPerRank) {
  // q=2: VC/8 = 8192/8 = 1024; 12LC²/8 = 24576/8 = 3072; ctx·C/2 = 256; 13LC/2 = 416; 2C/2 = 32.
  EXPECT_EQ(tp3d_params_per_rank(kTiny, 2), 1024 + 3072 + 256 + 416 + 32);  // 4800
  // q=1: the whole model, Ψ = (256+16)·32 + 2·(12·1024 + 13·32) + 64 = 34,176.
  EXPECT_EQ(tp3d_params_per_rank(kTiny, 1), 34176);
}

TEST(Tp3dFormulas, ActivationsPerBlock) {
  // q=2, m = 256/4 = 64 rows, Cq = 16: local 9·64·16 = 9216; gathered 7·2·64·16 = 14336;
  // stats 4·64 = 256; probabilities (16/4)·(2/2)·16·16 = 1024. 24,832 floats = 99,328 bytes.
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 2), 99328);
  // q=1: m = 256, Cq = 32: (9 + 7)·256·32 = 131,072; stats 4·256 = 1,024; probabilities
  // 16·2·16·16 = 8,192: 140,288 floats.
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 1), 4 * 140288);
}

TEST(Tp3dFormulas, ActivationsPerBlockUnderRecomputation) {
  // q=2: selective drops the 1024 floats of P, 23,808 floats.
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 2, Recompute::kSelective), 95232);
  // full: the checkpoints x (m·Cq = 64·16 floats); k = 1 one per block, k = 2 one over L = 2.
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 2, Recompute::kFull, 1), 4096);
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 2, Recompute::kFull, 2), 2048);
  // q=1: x is 256·32 floats.
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 1, Recompute::kFull, 1), 32768);
}

TEST(Tp3dFormulas, ActivationsPerBlockWithFlashAttention) {
  // q=2: P's (16/4)·1·256 = 1024 floats become lse's 4·1·16 = 64: 24,832 − 960 = 23,872 floats.
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 2, Recompute::kNone, 1, true), 95488);
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 2, Recompute::kSelective, 1, true),
            95488);
  EXPECT_EQ(tp3d_activation_bytes_per_block(kTiny, 16, 16, 2, Recompute::kFull, 1, true), 4096);
}

TEST(Tp3dFormulas, FullRecomputationSendsTheForwardsAgain) {
  // q=2, f = 1/2, M = 256, m = 64, per block forward: i-axis (1/2)·4·(3+1+4+4)·1024/4 = 6144;
  // j-axis (1/2)·4·(32+32+32+32)·256/4 = 16,384; l-axis (1/2)·4·(96+32+128+128)·256/4 = 49,152
  // plus two LayerNorms' 2 all_reduces of 64 floats, 2·2·2·(1/2)·256 = 1024. Times L = 2.
  const Tp3dBytes b = tp3d_recompute_bytes_per_step(kTiny, 16, 16, 2);
  EXPECT_EQ(b.i_axis, 12288);
  EXPECT_EQ(b.j_axis, 32768);
  EXPECT_EQ(b.l_axis, 100352);
  EXPECT_EQ(b.plane_l, 0);
  EXPECT_EQ(b.plane_j, 0);
  EXPECT_EQ(tp3d_recompute_calls_per_step(kTiny), 32);  // 4 linears × 3 + 2 LayerNorms × 2, × L
  const Tp3dBytes one = tp3d_recompute_bytes_per_step(kTiny, 16, 16, 1);  // q=1 sends nothing
  EXPECT_EQ(one.i_axis + one.j_axis + one.l_axis, 0);
}

TEST(Tp3dFormulas, BytesPerStepPerGroup) {
  // q=2: f = 1/2, f2 = 3/4, M = 256, m = 64.
  const Tp3dBytes b = tp3d_bytes_per_step(kTiny, 16, 16, 2);
  // i-axis: 3 collectives × 4 bytes × (1/2) × KN/4 per linear; Σ KN = 2·12·1024 + 256·32 = 32,768
  // → 1.5 · 32,768 = 49,152.
  EXPECT_EQ(b.i_axis, 49152);
  // j-axis: 2 collectives × (1/2) × 4·M·32/4 per linear side = 4,096 each, 2L·2 + 1 head sides
  // of 2 collectives: (8·2+2)/2 · 4,096 = 73,728; cross-entropy 2·(1/2)·(4·64 + 8·64) = 768.
  EXPECT_EQ(b.j_axis, 73728 + 768);
  // l-axis: (1/2)·(4/4)·256·(24·2·32 + 2·256) = 128·2,048 = 262,144; LayerNorms: 5 of
  // 2·(1/2)·(4·64 + 4·64 + 8·64) = 1,024 each = 5,120.
  EXPECT_EQ(b.l_axis, 262144 + 5120);
  // plane(l): embedding 2 × (3/4)·4·256·16 = 24,576; A vectors (16 + 12 + 2)·16 = 480 floats,
  // all_reduce 2·(3/4)·4·480 = 2,880.
  EXPECT_EQ(b.plane_l, 24576 + 2880);
  // plane(j): B vectors 2·(48 + 64) = 224 floats, 2·(3/4)·4·224 = 1,344; loss 2·(3/4)·8 = 12.
  EXPECT_EQ(b.plane_j, 1344 + 12);
  const Tp3dBytes one = tp3d_bytes_per_step(kTiny, 16, 16, 1);  // a cube of one rank sends nothing
  EXPECT_EQ(one.i_axis + one.j_axis + one.l_axis + one.plane_l + one.plane_j, 0);
}

TEST(Tp3dFormulas, CallsPerStep) {
  // 7·9 linears' + 3·5 LayerNorms' + 2 + 2 + 2 + 1 = 63 + 15 + 7 = 85.
  EXPECT_EQ(tp3d_calls_per_step(kTiny), 85);
}

}  // namespace
}  // namespace llmp
