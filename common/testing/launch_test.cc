// Tests of launch_or_init() (common/runtime/launch.h) from outside: this binary is started again
// as a child (subprocess.h) in the situations a user meets, and its exit status and one-line
// errors are checked. Runs as a 1-rank test; the children start their own mpiexec jobs.
//
// Glossary: N ranks requested (--ranks).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "common/comm/process_group.h"
#include "common/testing/subprocess.h"

namespace {

using llmp::testing::run_self;

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

// What a launched child sees; only prints in the children of the tests below.
TEST(LaunchProbe, PrintsWhatTheRanksSee) {
  if (!std::getenv("LLMP_LAUNCH_PROBE")) GTEST_SKIP();
  auto world = llmp::ProcessGroup::world();
  const int rank = world->rank(), size = world->size();
  const char* yield = std::getenv("LLMP_COMM_YIELD");
  const char* launched = std::getenv("LLMP_LAUNCHED");
  std::printf("probe: rank %d of %d, LLMP_LAUNCHED=%s, LLMP_COMM_YIELD=%s\n", rank, size,
              launched ? launched : "unset", yield ? yield : "unset");
}

TEST(Launch, RelaunchesUnderMpiexec) {
  auto r = run_self({"LLMP_LAUNCH_PROBE=1"}, {"--ranks=2", "--gtest_filter=LaunchProbe.*"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count(r.output, "probe: rank "), 2) << r.output;
  EXPECT_NE(r.output.find("probe: rank 1 of 2, LLMP_LAUNCHED=1"), std::string::npos) << r.output;
}

TEST(Launch, OneRankRunsInProcess) {
  auto r = run_self({"LLMP_LAUNCH_PROBE=1"}, {"--ranks=1", "--gtest_filter=LaunchProbe.*"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("probe: rank 0 of 1, LLMP_LAUNCHED=unset"), std::string::npos)
      << r.output;
}

// The parent's environment reaches every rank (hydra's default -genvall).
TEST(Launch, EnvironmentReachesEveryRank) {
  auto r = run_self({"LLMP_LAUNCH_PROBE=1", "LLMP_COMM_YIELD=0"},
                    {"--ranks=3", "--gtest_filter=LaunchProbe.*"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count(r.output, "LLMP_COMM_YIELD=0"), 3) << r.output;
}

TEST(Launch, MismatchedSizeNamesBothOnce) {
  auto r = run_self({}, {"--ranks=3"}, {"mpiexec", "-n", "2"});
  EXPECT_EQ(r.status, 2) << r.output;
  const std::string msg =
      "error: this job has 2 ranks (mpiexec -n 2) but the requested world size is 3\n";
  EXPECT_EQ(count(r.output, msg), 1) << r.output;
}

TEST(Launch, NoLaunchKeepsOneProcess) {
  auto r = run_self({"LLMP_NO_LAUNCH=1"}, {"--ranks=2"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("error: this job has 1 rank (not started by mpiexec, LLMP_NO_LAUNCH=1) "
                          "but the requested world size is 2\n"),
            std::string::npos)
      << r.output;
}

TEST(Launch, MissingMpiexecIsOneLine) {
  auto r = run_self({"PATH=/nonexistent"}, {"--ranks=2"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(r.output.rfind("error: cannot start 2 ranks: mpiexec not found on PATH (/nonexistent)",
                           0),
            0u)
      << r.output;
  EXPECT_EQ(count(r.output, "\n"), 1) << r.output;
}

}  // namespace
