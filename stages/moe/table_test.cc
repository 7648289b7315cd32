// What the dense-vs-MoE table (README.md, "Dense vs mixture of experts") claims, checked on the
// tiny pair: tiny against moe-tiny made top-1 (block 1 a mixture of E = 4 experts), 4 steps of
// B = 4 sequences.
//
// Hand-worked counts (kernels/cpu/flops.h's convention; tiny: V = 256, T = 16, C = 32, H = 2, L = 2):
//   tiny, per token      6·(V·C + 12C²·L) = 6·(8,192 + 24,576) = 196,608
//                        + attention 4·L·C·(2T+1) = 4·2·32·33 = 8,448           -> 205,056
//   moe-tiny, k = 1, c = 1.25: cap = ⌈1·16·1.25/4⌉ = 5, block 1 is the MoE block (L_m = 1)
//                        6·(V·C + 12C² + 4C²) = 6·24,576 = 147,456
//                        + router 6·C·E = 6·32·4 = 768
//                        + combine 6·k·C = 6·1·32 = 192
//                        + experts 48·C²·E·cap/T = 48·1,024·20/16 = 61,440
//                        + attention 8,448                                      -> 218,304
//     of which the padding is 48·C²·(E·cap − T)/T = 48·1,024·4/16 = 12,288, the router 768 and
//     the combine 192
//   moe-tiny, k = 1, c = 1: cap = 4, E·cap = T: no padding                     -> 206,016
//   mini (V 256, T 64, C 128, L 4): 6·(32,768 + 786,432) + 4·4·128·129 = 4,915,200 + 264,192
//                                                                               = 5,179,392
//   moe-mini (E 8, k 1, c 1.25, cap 10, L_m 2): 5,179,392 + 6·128·8·2 (12,288)
//                        + 6·1·128·2 (1,536) + 48·16,384·2·(80 − 64)/64 (393,216) = 5,586,432
//   parameters: tiny (256+16)·32 + 2·(12·1,024 + 13·32) + 2·32 = 34,176;
//               moe-tiny 8,704 + 12,704 + (4C² + 8C + C·E = 4,480) + E·(8C² + 5C) (33,408) + 64
//               = 59,360
#include "stages/moe/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace llmp {
namespace {

GPTConfig moe_tiny_top1(double capacity_factor) {
  GPTConfig c = GPTConfig::preset("moe-tiny");
  c.top_k = 1;
  c.capacity_factor = capacity_factor;
  return c;
}

TableRun small_run() {
  TableRun run;
  run.steps = 4;
  run.global_batch = 4;
  run.eval_batches = 2;
  run.eval_every = 2;
  return run;
}

TEST(MoeTable, ClosedFormMatchesHandWorkedCounts) {
  EXPECT_EQ(training_step_flops(GPTConfig::preset("tiny"), 4), 205056 * 64);
  EXPECT_EQ(training_step_flops(moe_tiny_top1(1.25), 4), 218304 * 64);
  EXPECT_EQ(training_step_flops(moe_tiny_top1(1.0), 4), 206016 * 64);
  EXPECT_EQ(training_step_flops(GPTConfig::preset("mini"), 8), int64_t{5179392} * 512);
  EXPECT_EQ(training_step_flops(GPTConfig::preset("moe-mini"), 8), int64_t{5586432} * 512);
}

TEST(MoeTable, RowsShowWhatTheReadmeSays) {
  const TableRun run = small_run();
  const auto rows = dense_vs_moe(GPTConfig::preset("tiny"), moe_tiny_top1(1.25), run);
  ASSERT_EQ(rows.size(), 2u);
  const ModelRow &d = rows[0], &m = rows[1];
  // More parameters for the mixture: E experts where the dense model has one MLP.
  EXPECT_EQ(d.params, 34176);
  EXPECT_EQ(m.params, 59360);
  EXPECT_GT(m.params, d.params);
  // FLOPs per token measured over the 4 steps: exactly the hand-worked counts and the closed form.
  EXPECT_EQ(d.tokens, 64);
  EXPECT_EQ(d.flops_per_token(), 205056.0);
  EXPECT_EQ(m.flops_per_token(), 218304.0);
  EXPECT_EQ(d.flops_measured, d.flops_formula);
  EXPECT_EQ(m.flops_measured, m.flops_formula);
  // The mixture costs the dense model's FLOPs plus the router and the capacity padding only.
  EXPECT_EQ(m.flops_per_token() - d.flops_per_token(), 768.0 + 12288.0 + 192.0);
  EXPECT_GT(m.flops_per_token() / d.flops_per_token(), 1.0);
  EXPECT_LT(m.flops_per_token() / d.flops_per_token(), 1.07);
  // The same data (training and validation batches) and the same initial embeddings: one seed.
  EXPECT_EQ(m.data_digest, d.data_digest);
  EXPECT_EQ(m.init_digest, d.init_digest);
  for (const ModelRow* r : {&d, &m}) {
    EXPECT_TRUE(std::isfinite(r->train_loss)) << r->model;
    EXPECT_TRUE(std::isfinite(r->val_loss)) << r->model;
    EXPECT_GT(r->tokens_per_s, 0) << r->model;
    EXPECT_GT(r->tokens_per_cpu_s, 0) << r->model;
    ASSERT_EQ(r->val_curve.size(), 2u) << r->model;
    EXPECT_EQ(r->val_curve[0].first, 2);
    EXPECT_EQ(r->val_curve[1].first, 4);
    EXPECT_EQ(r->val_curve[1].second, r->val_loss);
  }
  EXPECT_EQ(d.routing, "");
  EXPECT_NE(m.routing.find("tokens per expert"), std::string::npos) << m.routing;
  EXPECT_NE(m.routing.find("capacity 5 per expert"), std::string::npos) << m.routing;
  const std::string md = table_markdown(rows, run);
  EXPECT_NE(md.find("| tiny | 34,176 | 205,056 | 205,056 | 1.0000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| moe-tiny | 59,360 | 218,304 | 218,304 | 1.0646 |"), std::string::npos) << md;
}

TEST(MoeTable, WithoutPaddingOnlyTheRouterIsExtra) {
  TableRun run = small_run();
  run.steps = 2;
  const auto rows = dense_vs_moe(GPTConfig::preset("tiny"), moe_tiny_top1(1.0), run);
  EXPECT_EQ(rows[1].flops_per_token() - rows[0].flops_per_token(), 768.0 + 192.0);  // 6·C·(E+k)·L_m
  EXPECT_EQ(rows[1].flops_measured, rows[1].flops_formula);
}

TEST(MoeTable, BadInputIsOneLineNamingTheValues) {
  const TableRun run = small_run();
  try {
    dense_vs_moe(moe_tiny_top1(1.0), GPTConfig::preset("tiny"), run);
    FAIL() << "the pair in the wrong order was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("moe-tiny (E=4"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_THROW(dense_vs_moe(GPTConfig::preset("mini"), moe_tiny_top1(1.0), run),
               std::invalid_argument);
  TableRun none = run;
  none.steps = 0;
  EXPECT_THROW(measure_model(GPTConfig::preset("tiny"), none), std::invalid_argument);
  EXPECT_THROW(training_step_flops(GPTConfig::preset("tiny"), 0), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
