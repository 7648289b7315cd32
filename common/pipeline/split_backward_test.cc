// Single-process checks of the executor's building blocks:
//  - B (block_backward_input) + W (block_backward_weight) give GPT::block_backward's dx and
//    weight gradients (zero bubble must not change the math), and B frees what W does not need;
//  - GPTPartition cuts the units as gpt_partition.h's worked example says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/nn/gpt.h"
#include "common/pipeline/gpt_partition.h"
#include "common/pipeline/split_backward.h"

namespace llmp {
namespace {

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

TEST(SplitBackward, InputPlusWeightEqualsFullBackward) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  const GPT model(cfg);
  const int B = 2, T = cfg.ctx, C = cfg.d;
  std::vector<float> params(model.layout().num_params());
  model.init_params(params.data(), 7);
  const float* bp = params.data() + model.layout().unit_offset(1);
  const int64_t nb = model.layout().unit_numel(1);
  std::vector<float> x(B * T * C), dy(B * T * C);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * i), dy[i] = std::cos(0.11 * i);

  // Reference: the fused backward.
  BlockCache cache;
  std::vector<float> y(x.size()), dx_ref(x.size()), g_ref(nb, 0.0f);
  model.block_forward(bp, x.data(), B, T, y.data(), &cache);
  model.block_backward(bp, x.data(), cache, dy.data(), dx_ref.data(), g_ref.data());

  // B then W, on a fresh cache.
  BlockCache cache2;
  BlockGradCache keep;
  std::vector<float> dx(x.size()), g(nb, 0.0f);
  model.block_forward(bp, x.data(), B, T, y.data(), &cache2);
  block_backward_input(model, bp, x.data(), &cache2, dy.data(), dx.data(), &keep);
  EXPECT_FALSE(cache2.att.defined()) << "B frees attention's probabilities (W does not read them)";
  EXPECT_FALSE(cache2.qkv.defined());
  EXPECT_FALSE(cache2.fch.defined());
  EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; }))
      << "B must not touch the weight gradients";
  block_backward_weight(model, bp, x.data(), cache2, keep, g.data());

  const double rel_dx = max_rel(dx, dx_ref), rel_g = max_rel(g, g_ref);
  std::printf("B+W vs block_backward: dx rel diff %.2e, dW rel diff %.2e\n", rel_dx, rel_g);
  EXPECT_LT(rel_dx, 1e-6);
  EXPECT_LT(rel_g, 1e-6);
}

TEST(GPTPartition, WorkedExampleL8P2V2) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.layers = 8;
  const GPT model(cfg);
  const GPTLayout& lay = model.layout();
  const GPTPartition part(lay, 8, 2, 2);
  // virtual stage: 0 -> units 0,1,2; 1 -> 3,4; 2 -> 5,6; 3 -> 7,8,9.
  EXPECT_EQ(part.unit_begin(0), 0);
  EXPECT_EQ(part.unit_end(0), 3);
  EXPECT_EQ(part.unit_begin(1), 3);
  EXPECT_EQ(part.unit_end(2), 7);
  EXPECT_EQ(part.unit_end(3), 10);
  EXPECT_EQ(part.stage(1, 1).index, 3);
  EXPECT_TRUE(part.stage(1, 1).last);
  EXPECT_TRUE(part.stage(0, 0).first);
  EXPECT_EQ(part.stage(0, 1).first_block, 4);
  // Rank 1 holds units 3,4 | 7,8,9 | wte copy; rank 0 units 0,1,2 | 5,6.
  const int64_t wte = lay.unit_numel(0) - int64_t{cfg.ctx} * cfg.d;
  const int64_t blk = lay.unit_numel(1);
  EXPECT_EQ(part.local_numel(0), lay.unit_numel(0) + 4 * blk);
  EXPECT_EQ(part.local_numel(1), 4 * blk + lay.unit_numel(9) + wte);
  EXPECT_EQ(part.wte_local_offset(0), 0);
  EXPECT_EQ(part.wte_local_offset(1), 4 * blk + lay.unit_numel(9));
  EXPECT_EQ(part.embedding_ranks(), (std::vector<int>{0, 1}));
  // Owned segments (without the copy) tile [0, Ψ) exactly.
  int64_t owned = 0;
  for (int r = 0; r < 2; ++r)
    for (const ParamSegment& s : part.segments(r)) owned += s.wte_copy ? 0 : s.numel;
  EXPECT_EQ(owned, lay.num_params());
}

TEST(GPTPartition, RejectsLayersNotDivisible) {
  EXPECT_EQ(GPTPartition::check(8, 4, 2), "");
  EXPECT_EQ(GPTPartition::check(6, 2, 2), "layers 6 not divisible by p·v = 4 (p=2, v=2)");
  const GPT model(GPTConfig::preset("tiny"));  // L = 2
  EXPECT_THROW(GPTPartition(model.layout(), 2, 4, 1), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
