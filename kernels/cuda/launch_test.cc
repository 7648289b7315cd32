// launch.h on the host: the grids cover every element, row and column exactly once.
#include "kernels/cuda/launch.h"

#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace cuda
}  // namespace llmp
