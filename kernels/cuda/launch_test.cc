// launch.h on the host: the grids cover every element, row and column exactly once, and AdamW's
// decay runs give each element the λ common/optim/adamw.cc gives it.
#include "kernels/cuda/launch.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/optim/adamw.h"

namespace llmp {
namespace cuda {
namespace {

TEST(Launch, ElementwiseGridsAreCappedAndCoverN) {
  EXPECT_EQ(elementwise_blocks(0), 0);
  EXPECT_EQ(elementwise_blocks(-3), 0);
  EXPECT_EQ(elementwise_blocks(1), 1);
  EXPECT_EQ(elementwise_blocks(kThreads), 1);
  EXPECT_EQ(elementwise_blocks(kThreads + 1), 2);
  EXPECT_EQ(elementwise_blocks(int64_t{1} << 40),
            kMaxBlocks);  // the grid-stride loop does the rest
  for (int64_t n : {1, 255, 256, 257, 100000}) {
    const int64_t threads = static_cast<int64_t>(elementwise_blocks(n)) * kThreads;
    EXPECT_GE(threads, n);
    EXPECT_LT(threads - kThreads, n);  // no block without work
  }
  EXPECT_EQ(reduce_blocks(int64_t{1} << 30), kMaxReduceBlocks);
  EXPECT_EQ(reduce_blocks(1000), 4);
  EXPECT_EQ(reduce_blocks(0), 0);
}

// Simulates every (block, thread) of the grid: each row is owned by exactly one warp.
TEST(Launch, WarpPerRowCoversEachRowOnce) {
  for (int64_t N : {1, 7, 8, 9, 64, 1001}) {
    const int blocks = warp_per_row_blocks(N);
    std::vector<int> owners(N, 0);
    for (int b = 0; b < blocks; ++b)
      for (int t = 0; t < kThreads; t += kWarp) {  // lane 0 of each warp
        const int64_t r = warp_row(b, t);
        for (int lane = 1; lane < kWarp; ++lane) ASSERT_EQ(warp_row(b, t + lane), r);
        if (r < N) ++owners[r];
      }
    for (int64_t r = 0; r < N; ++r) ASSERT_EQ(owners[r], 1) << "row " << r << " of " << N;
    EXPECT_LT(static_cast<int64_t>(blocks - 1) * (kThreads / kWarp), N);  // no idle block
  }
  EXPECT_EQ(warp_per_row_blocks(0), 0);
}

TEST(Launch, ColumnGridCoversC) {
  EXPECT_EQ(column_blocks(0), 0);
  EXPECT_EQ(column_blocks(768), 3);
  EXPECT_EQ(column_blocks(769), 4);
}

// Random decay ranges and spans against the per-element rule of AdamW::update.
TEST(Launch, AdamWSegmentsGiveEachElementItsDecay) {
  std::mt19937 gen(5);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + gen() % 60;
    std::vector<ElementRange> decay;
    for (int64_t at = 0; at < n;) {  // sorted, disjoint, possibly empty or adjacent ranges
      const int64_t b = at + gen() % 5, e = b + gen() % 8;
      if (e > n) break;
      decay.push_back({b, e});
      at = e;
    }
    const int64_t i0 = gen() % n, count = gen() % (n - i0 + 1);
    const std::vector<AdamWSegment> segs = adamw_segments(decay, i0, count);
    int64_t at = i0;
    for (const AdamWSegment& s : segs) {
      ASSERT_EQ(s.begin, at) << "trial " << trial;  // in order, no gap, no overlap
      ASSERT_LT(s.begin, s.end);                    // non-empty
      for (int64_t e = s.begin; e < s.end; ++e) {
        bool in = false;
        for (const ElementRange& r : decay) in |= r.begin <= e && e < r.end;
        ASSERT_EQ(s.decayed, in) << "trial " << trial << " element " << e;
      }
      at = s.end;
    }
    ASSERT_EQ(at, i0 + count) << "trial " << trial;
  }
  // A worked case: ranges [2,5) and [9,13) over the span [3, 11).
  const std::vector<ElementRange> d = {{2, 5}, {9, 13}};
  const std::vector<AdamWSegment> want = {{3, 5, true}, {5, 9, false}, {9, 11, true}};
  EXPECT_EQ(adamw_segments(d, 3, 8), want);
}

}  // namespace
}  // namespace cuda
}  // namespace llmp
