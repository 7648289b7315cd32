// node_local_rank on this machine: every rank of the test is on one node, so the local ranks are
// 0 .. N-1, each once, the local size is N, and (ordered by world rank) l equals the world rank.
// Glossary: N ranks, r world rank, l local rank.
#include "common/comm/local_rank.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/comm/device_for_rank.h"
#include "common/comm/process_group.h"

namespace llmp {
namespace {

TEST(LocalRank, OneNodeGivesZeroToNMinusOne) {
  auto world = ProcessGroup::world();
  const int N = world->size(), r = world->rank();
  const LocalRank l = node_local_rank();
  EXPECT_EQ(l.size, N);
  EXPECT_EQ(l.rank, r);
  // Every rank's local rank, gathered: each of 0 .. N-1 exactly once.
  Tensor mine = Tensor::empty({1}, DType::kF64), all = Tensor::zeros({N}, DType::kF64);
  mine.f64()[0] = l.rank;
  world->all_gather(mine, all);
  std::vector<int> seen;
  for (int i = 0; i < N; ++i) seen.push_back(static_cast<int>(all.f64()[i]));
  std::sort(seen.begin(), seen.end());
  for (int i = 0; i < N; ++i) EXPECT_EQ(seen[i], i);
  // Two ranks sharing this node's one (hypothetical) GPU both get device 0.
  EXPECT_EQ(device_for_rank(l.rank, l.size, 1), 0);
  EXPECT_EQ(device_for_rank(l.rank, l.size, l.size), l.rank);
}

}  // namespace
}  // namespace llmp
