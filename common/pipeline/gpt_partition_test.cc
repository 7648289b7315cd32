// GPTPartition cuts the units as gpt_partition.h's worked example says (single process). (That
// zero bubble's B + W equal the block backward is common/nn/gpt_test.cc's.)
#include <gtest/gtest.h>

#include <vector>

#include "common/nn/gpt.h"
#include "common/pipeline/gpt_partition.h"

namespace llmp {
namespace {

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
  // Where the walk finds each unit: its chunk, or for unit 0 on rank 1 the wte copy.
  EXPECT_EQ(part.unit_local_offset(1, 7), 2 * blk);
  EXPECT_EQ(part.unit_local_offset(1, 0), part.wte_local_offset(1));
  EXPECT_EQ(part.unit_local_offset(0, 5), lay.unit_numel(0) + 2 * blk);
  EXPECT_EQ(part.unit_local_offset(0, 3), -1);
  // How much of each unit is there: all of it in a chunk, wte alone for rank 1's unit 0.
  EXPECT_EQ(part.unit_local_numel(1, 7), blk);
  EXPECT_EQ(part.unit_local_numel(1, 9), lay.unit_numel(9));
  EXPECT_EQ(part.unit_local_numel(1, 0), wte);
  EXPECT_EQ(part.unit_local_numel(0, 0), lay.unit_numel(0));
  EXPECT_EQ(part.unit_local_numel(0, 3), 0);
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
