// Which groups cross nodes (placement.h's rank order: tp fastest, then pp, then dp), worked by
// listing the members by hand.
#include <gtest/gtest.h>

#include "tools/plan/placement.h"

namespace llmp::plan {
namespace {

TEST(Placement, MegatronGridOnEightGpuNodes) {
  // dp 16 pp 8 tp 8, G 8: tp {0..7} is node 0; pp {0,8,...,56} spans nodes 0..7; dp {0,64,...}.
  const GroupPlacement g = place_groups(16, 8, 8, 8);
  EXPECT_FALSE(g.tp);
  EXPECT_TRUE(g.pp);
  EXPECT_TRUE(g.dp);
  EXPECT_TRUE(g.emb);  // stage 0 (GPU 0) and stage 7 (GPU 56)
}

TEST(Placement, TensorParallelBeyondANodeCrossesIt) {
  EXPECT_TRUE(place_groups(1, 1, 16, 8).tp);   // {0..15}: nodes 0 and 1
  EXPECT_FALSE(place_groups(2, 1, 8, 8).tp);   // {0..7}, {8..15}
  EXPECT_TRUE(place_groups(2, 1, 8, 8).dp);    // {0, 8}
}

TEST(Placement, WholeReplicaInsideANode) {
  // dp 2 pp 1 tp 4, G 8: dp {0,4}, {1,5}, ... all in node 0.
  const GroupPlacement g = place_groups(2, 1, 4, 8);
  EXPECT_FALSE(g.tp);
  EXPECT_FALSE(g.dp);
  // dp 2 pp 2 tp 2 on nodes of 4: tp {0,1}, pp {0,2} inside node 0; dp {0,4} crosses.
  const GroupPlacement h = place_groups(2, 2, 2, 4);
  EXPECT_FALSE(h.tp);
  EXPECT_FALSE(h.pp);
  EXPECT_FALSE(h.emb);
  EXPECT_TRUE(h.dp);
}

TEST(Placement, UnalignedGroupsAndTheEmbeddingPair) {
  // tp 4 on nodes of 6: the second group {4,5,6,7} straddles nodes 0 and 1.
  EXPECT_TRUE(place_groups(2, 1, 4, 6).tp);
  // pp 4 tp 4 on nodes of 8: the pp group {0, 4, 8, 12} (stride tp) crosses; the embedding pair
  // {0, 12} crosses, though with pp 2 the pair {0, 4} does not.
  EXPECT_TRUE(place_groups(1, 4, 4, 8).pp);
  EXPECT_TRUE(place_groups(1, 4, 4, 8).emb);
  EXPECT_FALSE(place_groups(1, 2, 4, 8).emb);
  EXPECT_THROW(place_groups(0, 1, 1, 8), std::invalid_argument);
}

}  // namespace
}  // namespace llmp::plan
