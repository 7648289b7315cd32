// The closed forms of tp_formulas.h against figures worked out by hand for mini (V = 256,
// ctx = 64, L = 4, C = 128, H = 4), B = 16, T = 64, t = 4: the numbers the tensor_parallel and
// sequence_parallel READMEs print.
//
//   Ψ_r  = 256·128/4 + 64·128 + 4·(12·128²/4 + 7·128/4 + 6·128) + 2·128
//        = 8,192 + 8,192 + 4·50,144 + 256 = 217,216           (×4 = 868,864 bytes)
//   TP activations per block = sbh(16 + 48/4 + 4·4·64/(128·4)) + 16sb, sbh = 64·16·128 = 131,072
//        = 30·131,072 + 16,384 = 3,948,544
//   SP activations per block = sbh/4·(64 + 4·4·64/128) + 16sb/4 = 72·32,768 + 4,096 = 2,363,392
//   bytes per step = 2·3/4·(18·4·16·64·128 + 12·16·64) = 1.5·(9,437,184 + 12,288) = 14,174,208
//   re-gather = 2·4·3/4·4·16·64·128 = 3,145,728
//   replicated gradients = 2·3/4·4·(64·128 + 6·4·128 + 2·128) = 6·11,520 = 69,120
//   collective calls: BT = 1,024 rows, V/t = 64, ⌊2^22/64⌋ = 65,536 ≥ 1,024: one chunk, R = 1,024
//        TP 4·4 + 2 + 2·1 = 20; SP 10·4 + 5 + 2 = 47; TP + full recomputation 20 + 2·4 = 28,
//        with Pa every 3 blocks 28 + ⌈4/3⌉ = 30; SP + full recomputation 47 + 4·4 = 63
//
// GPT-2 small's vocabulary (padded to V = 50,304 as llm.c does) makes the head chunk its rows:
// L = 12, t = 1, B = 8, T = 1,024: ⌊4,194,304/50,304⌋ = 83 rows per chunk, ⌈8,192/83⌉ = 99 chunks
// (83·98 = 8,134 < 8,192 ≤ 8,217 = 83·99): TP 4·12 + 2 + 2·99 = 248 calls. At t = 4, V/t =
// 12,576, ⌊4,194,304/12,576⌋ = 333, ⌈8,192/333⌉ = 25 (333·24 = 7,992): 48 + 2 + 50 = 100.
#include "common/plan/tp_formulas.h"

#include <gtest/gtest.h>

namespace llmp {
namespace {

const TpModelDims kMini{256, 64, 4, 128, 4};

TEST(TpFormulas, MiniOnFourRanksByHand) {
  EXPECT_EQ(tp_params_per_rank(kMini, 4), 217216);
  EXPECT_EQ(tp_activation_bytes_per_block(kMini, 16, 64, 4, false), 3948544);
  EXPECT_EQ(tp_activation_bytes_per_block(kMini, 16, 64, 4, true), 2363392);
  EXPECT_EQ(tp_bytes_per_step(kMini, 16, 64, 4), 14174208);
  EXPECT_EQ(sp_regather_bytes_per_step(kMini, 16, 64, 4), 3145728);
  EXPECT_EQ(sp_replicated_grad_bytes_per_step(kMini, 4), 69120);
}

TEST(TpFormulas, CollectiveCallsByHand) {
  EXPECT_EQ(tp_collective_calls_per_step(kMini, 16, 64, 4, false), 20);
  EXPECT_EQ(tp_collective_calls_per_step(kMini, 16, 64, 4, true), 47);
  EXPECT_EQ(tp_collective_calls_per_step(kMini, 16, 64, 4, false, true, 1, false), 28);
  EXPECT_EQ(tp_collective_calls_per_step(kMini, 16, 64, 4, false, true, 3, true), 30);
  EXPECT_EQ(tp_collective_calls_per_step(kMini, 16, 64, 4, true, true, 1, false), 63);
  // Pa does nothing on one rank (nothing to gather) and nothing under SP (already split); one
  // rank holds the whole vocabulary: no cross-entropy reductions (4L + 2 + 2L = 26).
  EXPECT_EQ(tp_collective_calls_per_step(kMini, 16, 64, 1, false, true, 1, true), 26);
  EXPECT_EQ(tp_collective_calls_per_step(kMini, 16, 64, 4, true, true, 1, true), 63);
  const TpModelDims gpt2{50304, 1024, 12, 768, 12};
  EXPECT_EQ(tp_collective_calls_per_step(gpt2, 8, 1024, 1, false), 50);  // 4L + 2
  EXPECT_EQ(tp_collective_calls_per_step(gpt2, 8, 1024, 4, false), 100);
}

TEST(TpFormulas, OneRankIsTheWholeModelAndSendsNothing) {
  // Ψ = (V + ctx)·C + L·(12C² + 13C) + 2C = 834,304 for mini.
  EXPECT_EQ(tp_params_per_rank(kMini, 1), 834304);
  EXPECT_EQ(tp_bytes_per_step(kMini, 16, 64, 1), 0);
  EXPECT_EQ(sp_regather_bytes_per_step(kMini, 16, 64, 1), 0);
  // Sequence parallelism on one rank keeps what tensor parallelism keeps.
  EXPECT_EQ(tp_activation_bytes_per_block(kMini, 16, 64, 1, true),
            tp_activation_bytes_per_block(kMini, 16, 64, 1, false));
}

}  // namespace
}  // namespace llmp
