// What the watchdog's message names (watchdog.h): the operation, the peer as a world rank and the
// group by the name ProcessGrid gave it; a duplicate keeps its group's name; a wait that completes
// in time is left alone with the watchdog on. A stalled rank on a real run is
// tests/watchdog_test.sh. Run on 1 and 2 ranks (mpi_test in BUILD).
//
// Glossary: N ranks; w world rank.
#include "common/comm/watchdog.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/comm/grid.h"

namespace llmp {
namespace {

TEST(Watchdog, DescribesOperationPeerAndGroup) {
  auto world = ProcessGroup::world();
  const int N = world->size();
  ProcessGrid grid(world, 1, N, 1);  // a pipeline: pp group = world, in world order
  ProcessGroup& pp = grid.pp_group();
  EXPECT_EQ(pp.name(), "pipeline group");
  EXPECT_EQ(grid.dp_group().name(), "data-parallel group");
  EXPECT_EQ(grid.tp_group().name(), "tensor-parallel group");
  EXPECT_EQ(world->name(), "world");
  EXPECT_EQ(pp.duplicate()->name(), "pipeline group");

  EXPECT_EQ(describe({"recv_forward", &pp, N - 1, true}),
            "recv_forward from rank " + std::to_string(N - 1) + " (pipeline group)");
  EXPECT_EQ(describe({"send", &pp, 0, false}), "send to rank 0 (pipeline group)");
  std::string ranks;
  for (int w = 0; w < N; ++w) ranks += (w ? "," : "") + std::to_string(w);
  EXPECT_EQ(describe({"all_reduce", &pp}),
            "all_reduce over the pipeline group (world ranks " + ranks + ")");
}

TEST(Watchdog, WaitsThatCompleteInTimeAreLeftAlone) {
  const double before = comm_timeout();
  set_comm_timeout(5);
  auto world = ProcessGroup::world();
  Tensor t = Tensor::zeros({4}, DType::kF32);
  for (int i = 0; i < 100; ++i) world->all_reduce(t);  // each far below 5 s
  world->barrier();
  EXPECT_DOUBLE_EQ(comm_timeout(), 5);
  set_comm_timeout(before);
}

}  // namespace
}  // namespace llmp
