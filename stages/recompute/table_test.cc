// The recomputation table's claims, from what the walks measured (table.h): without
// recomputation the activation peak grows by one block's whole cache per block (O(L)); with full
// recomputation by one block input per block; with segments of √L blocks it grows like √L
// (16 blocks cost less than twice 4 blocks, where none costs over three times); the recomputed
// FLOPs equal the formula. No timing is asserted (a benchmark prints it).
#include "stages/recompute/table.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace llmp
