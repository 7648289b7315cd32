// ProcessGrid against grid.h's layout formula, for every factorisation dp·pp·tp = N of the world
// size (world 4: 4×1×1, 2×2×1, 2×1×2, 1×2×2, 1×4×1, 1×1×4), and the one-line error of a grid
// that does not fit the world.
//
//   world_rank = (dp_rank·pp + pp_rank)·tp + tp_rank
//   tp group: the tp ranks with my (dp_rank, pp_rank), in tp_rank order; likewise pp and dp.
//
// Glossary: dp, pp, tp grid sizes; N = dp·pp·tp world size; w world rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>
#include <vector>

#include "common/comm/grid.h"
#include "common/testing/subprocess.h"

namespace llmp {
namespace {

std::vector<std::tuple<int, int, int>> factorisations(int n) {
  std::vector<std::tuple<int, int, int>> out;
  for (int dp = 1; dp <= n; ++dp)
    for (int pp = 1; pp <= n; ++pp)
      if (n % (dp * pp) == 0) out.emplace_back(dp, pp, n / (dp * pp));
  return out;
}

TEST(ProcessGrid, GroupsMatchTheLayoutFormula) {
  auto world = ProcessGroup::world();
  const int N = world->size(), w = world->rank();
  for (auto [dp, pp, tp] : factorisations(N)) {
    SCOPED_TRACE("dp " + std::to_string(dp) + " pp " + std::to_string(pp) + " tp " +
                 std::to_string(tp));
    ProcessGrid g(world, dp, pp, tp);
    EXPECT_EQ(ProcessGrid::world_rank_of(g.dp_rank(), g.pp_rank(), g.tp_rank(), pp, tp), w);
    EXPECT_EQ(g.tp_rank(), w % tp);
    EXPECT_EQ(g.pp_rank(), (w / tp) % pp);
    EXPECT_EQ(g.dp_rank(), w / (tp * pp));
    std::vector<int> tp_members, pp_members, dp_members;
    for (int t = 0; t < tp; ++t)
      tp_members.push_back(ProcessGrid::world_rank_of(g.dp_rank(), g.pp_rank(), t, pp, tp));
    for (int p = 0; p < pp; ++p)
      pp_members.push_back(ProcessGrid::world_rank_of(g.dp_rank(), p, g.tp_rank(), pp, tp));
    for (int d = 0; d < dp; ++d)
      dp_members.push_back(ProcessGrid::world_rank_of(d, g.pp_rank(), g.tp_rank(), pp, tp));
    EXPECT_EQ(g.tp_group().world_ranks(), tp_members);
    EXPECT_EQ(g.pp_group().world_ranks(), pp_members);
    EXPECT_EQ(g.dp_group().world_ranks(), dp_members);
    EXPECT_EQ(g.tp_group().rank(), g.tp_rank());
    EXPECT_EQ(g.pp_group().rank(), g.pp_rank());
    EXPECT_EQ(g.dp_group().rank(), g.dp_rank());
    // The groups really communicate: sum of world ranks over my dp group.
    Tensor t = Tensor::empty({1});
    t.f32()[0] = static_cast<float>(w);
    g.dp_group().all_reduce(t);
    float expect = 0;
    for (int m : dp_members) expect += m;
    EXPECT_FLOAT_EQ(t.f32()[0], expect);
  }
}

// grid.h's worked example, for the 4-rank variant: world 4 = dp 2 × pp 2 × tp 1 and
// dp 1 × pp 2 × tp 2, group by group.
TEST(ProcessGrid, WorldOfFourByHand) {
  auto world = ProcessGroup::world();
  if (world->size() != 4) GTEST_SKIP() << "the 4-rank variant checks this";
  const int w = world->rank();
  ProcessGrid a(world, 2, 2, 1);  // dp groups {0,2} {1,3}; pp groups {0,1} {2,3}
  const std::vector<std::vector<int>> a_dp = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  const std::vector<std::vector<int>> a_pp = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  EXPECT_EQ(a.dp_group().world_ranks(), a_dp[w]);
  EXPECT_EQ(a.pp_group().world_ranks(), a_pp[w]);
  EXPECT_EQ(a.tp_group().world_ranks(), std::vector<int>{w});
  ProcessGrid b(world, 1, 2, 2);  // tp groups {0,1} {2,3}; pp groups {0,2} {1,3}
  const std::vector<std::vector<int>> b_tp = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  const std::vector<std::vector<int>> b_pp = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  EXPECT_EQ(b.tp_group().world_ranks(), b_tp[w]);
  EXPECT_EQ(b.pp_group().world_ranks(), b_pp[w]);
  EXPECT_EQ(b.dp_group().world_ranks(), std::vector<int>{w});
}

// The check itself, without a job: what the launcher runs before any rank starts.
TEST(ProcessGrid, MismatchMessage) {
  EXPECT_EQ(grid_mismatch({2, 2, 1}, 4), "");
  EXPECT_EQ(grid_mismatch({1, 4, 1}, 4), "");
  EXPECT_EQ(grid_mismatch({2, 3, 1}, 4), "dp 2 × pp 3 × tp 1 = 6 does not match the world size 4");
  EXPECT_EQ(grid_mismatch({0, 4, 1}, 0), "dp 0 × pp 4 × tp 1 = 0 does not match the world size 0");
}

// Builds a grid that does not fit; only in the child job of the test below.
TEST(ProcessGrid, MismatchProbe) {
  if (!std::getenv("LLMP_GRID_MISMATCH")) GTEST_SKIP();
  ProcessGrid g(ProcessGroup::world(), 2, 3, 1);
  ADD_FAILURE() << "ProcessGrid accepted a 2×3×1 grid on " << g.world().size() << " ranks";
}

TEST(ProcessGrid, MismatchNamesAllNumbersOnce) {
  if (!testing::single_rank()) GTEST_SKIP() << "starts a child job; runs in the np1 variant";
  auto r = testing::run_self({"LLMP_GRID_MISMATCH=1"},
                             {"--ranks=2", "--gtest_filter=ProcessGrid.MismatchProbe"});
  EXPECT_EQ(r.status, 2) << r.output;
  const std::string msg = "error: dp 2 × pp 3 × tp 1 = 6 does not match the world size 2\n";
  const size_t at = r.output.find(msg);
  EXPECT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(msg, at + 1), std::string::npos) << "printed twice:\n" << r.output;
}

}  // namespace
}  // namespace llmp
