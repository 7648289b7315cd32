// Failures that end the job, seen from outside: an MPI error names the call, the file:line and
// MPI's own message (MPI_CHECK with MPI_ERRORS_RETURN on the group's communicator), and a count
// beyond MPI's int fails before MPI is called. Each case runs this binary again as a 2-rank child
// job (common/testing/subprocess.h), from the 1-rank variant.
//
// Glossary: status = the child job's exit status.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/comm/mpi_util.h"
#include "common/comm/process_group.h"
#include "common/testing/subprocess.h"

namespace llmp {
namespace {

// Probes: only in the child jobs.
TEST(MpiErrorProbe, InvalidTag) {
  if (!std::getenv("LLMP_PROBE_TAG")) GTEST_SKIP();
  auto pg = ProcessGroup::world();
  Tensor t = Tensor::zeros({4});
  if (pg->rank() == 0) pg->send(t, 1, /*tag=*/-5);  // MPI tags are >= 0
  pg->barrier();
}

TEST(MpiErrorProbe, CountBeyondInt) {
  if (!std::getenv("LLMP_PROBE_COUNT")) GTEST_SKIP();
  mpi_count(int64_t(1) << 31, "all_reduce");
}

TEST(MpiErrors, MpiCheckNamesTheCall) {
  if (!testing::single_rank()) GTEST_SKIP() << "starts a child job; runs in the np1 variant";
  auto r = testing::run_self({"LLMP_PROBE_TAG=1"},
                             {"--ranks=2", "--gtest_filter=MpiErrorProbe.InvalidTag"});
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("process_group_async.cc:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 0] MPI_Isend("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(") failed: Invalid tag"), std::string::npos) << r.output;
}

TEST(MpiErrors, CountBeyondIntFailsClearly) {
  if (!testing::single_rank()) GTEST_SKIP() << "starts a child job; runs in the np1 variant";
  auto r = testing::run_self({"LLMP_PROBE_COUNT=1"},
                             {"--ranks=2", "--gtest_filter=MpiErrorProbe.CountBeyondInt"});
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("all_reduce: count 2147483648 does not fit MPI's int count"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace llmp
