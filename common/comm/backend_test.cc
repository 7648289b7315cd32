// resolve_backend (backend.h): auto picks NCCL only for several ranks with a GPU each and NCCL
// linked in;
// an explicit nccl that cannot run is refused with the counts; mpi is always possible.
#include "common/comm/backend.h"

#include <gtest/gtest.h>

namespace llmp {
namespace {

// One node: the world's ranks are the node's.
std::string resolve(const std::string& asked, bool linked, int ranks, int gpus,
                    std::string* why = nullptr) {
  std::string ignored;
  return resolve_backend(asked, linked, ranks, ranks, gpus, why ? why : &ignored);
}

TEST(ResolveBackend, AutoIsNcclOnlyWithSeveralRanksAGpuEachAndNcclLinked) {
  EXPECT_EQ(resolve("auto", true, 2, 2), "nccl");
  EXPECT_EQ(resolve("auto", true, 1, 8), "mpi");  // one rank: nothing to communicate
  std::string why;
  EXPECT_EQ(resolve_backend("auto", true, /*world=*/16, /*local=*/8, 8, &why), "nccl");
  EXPECT_EQ(resolve("nccl", true, 1, 8), "nccl");  // asked for: NCCL even alone
  EXPECT_EQ(resolve("auto", true, 3, 2), "mpi");   // ranks share a GPU: NCCL would refuse
  EXPECT_EQ(resolve("auto", false, 2, 2), "mpi");  // no NCCL in this binary
  EXPECT_EQ(resolve("auto", true, 1, 0), "mpi");   // no GPU at all
}

TEST(ResolveBackend, MpiAlwaysAndNcclRefusedWithTheReason) {
  EXPECT_EQ(resolve("mpi", true, 4, 1), "mpi");
  EXPECT_EQ(resolve("nccl", true, 4, 4), "nccl");
  std::string why;
  EXPECT_EQ(resolve("nccl", true, 4, 1, &why), "");
  EXPECT_EQ(why,
            "--backend nccl: 4 ranks on this node share 1 GPU(s), and NCCL needs one GPU per "
            "rank; use --backend mpi (host staging) or fewer ranks");
  why.clear();
  EXPECT_EQ(resolve("nccl", false, 1, 1, &why), "");
  EXPECT_NE(why.find("this binary has no NCCL"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(resolve("gloo", true, 1, 1, &why), "");
  EXPECT_EQ(why, "--backend gloo: expected auto, mpi or nccl");
}

}  // namespace
}  // namespace llmp
