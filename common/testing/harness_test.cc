// Tests of the MPI test harness (mpi_gtest_main.cc) itself: every rank runs every test, rank 0
// reports, and a failure on any one rank fails the job.
//
// The failure cases run this binary again as a child job (subprocess.h) with
// LLMP_HARNESS_FAIL=1, which turns on the deliberately failing test below.
//
// Glossary: N ranks, r = rank in the world.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "common/comm/process_group.h"
#include "common/testing/subprocess.h"

namespace {

using llmp::testing::run_self;
using llmp::testing::single_rank;

int world_rank() { return llmp::ProcessGroup::world()->rank(); }

// Every rank takes part: sum over ranks of (r + 1) = N(N+1)/2.
TEST(Harness, EveryRankRunsTheTest) {
  auto world = llmp::ProcessGroup::world();
  const int n = world->size();
  llmp::Tensor t = llmp::Tensor::empty({1}, llmp::DType::kF64);
  t.f64()[0] = world->rank() + 1;
  world->all_reduce(t);
  EXPECT_EQ(t.f64()[0], n * (n + 1) / 2);
}

// The ranks run as many ranks as the variant's name says (LLMP_TEST_RANKS is only read when no
// --ranks is given, and launch_or_init() checks the job's size, so this is a consistency check).
TEST(Harness, RanksFlagIsNotLeftForGtest) {
  for (const std::string& a : ::testing::internal::GetArgvs())
    EXPECT_NE(a.rfind("--ranks", 0), 0u) << "--ranks reached gtest: " << a;
}

// Fails on rank 1 only, when the parent test asks for it.
TEST(Harness, DeliberateFailureOnRankOne) {
  if (!std::getenv("LLMP_HARNESS_FAIL")) GTEST_SKIP() << "only in the child job of FailureOn...";
  EXPECT_NE(world_rank(), 1) << "deliberate failure";
}

// Throws on rank 1 only, before a collective the other ranks enter, when the parent asks for it.
TEST(Harness, DeliberateThrowOnRankOne) {
  if (!std::getenv("LLMP_HARNESS_THROW")) GTEST_SKIP() << "only in the child job of Throw...";
  auto world = llmp::ProcessGroup::world();
  if (world->rank() == 1) throw std::runtime_error("deliberate throw");
  llmp::Tensor t = llmp::Tensor::zeros({1}, llmp::DType::kF64);
  world->all_reduce(t);  // ranks 0 and 2 wait here for rank 1, which never comes
}

TEST(Harness, PassingJobExitsZero) {
  if (!single_rank()) GTEST_SKIP() << "starts a child job; runs in the np1 variant";
  auto r = run_self({}, {"--ranks=3", "--gtest_filter=Harness.EveryRankRunsTheTest"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
  // Only rank 0 prints gtest's report: one RUN line, not three.
  size_t runs = 0;
  for (size_t p = r.output.find("[ RUN      ]"); p != std::string::npos;
       p = r.output.find("[ RUN      ]", p + 1))
    ++runs;
  EXPECT_EQ(runs, 1u) << "only rank 0 should print the report:\n" << r.output;
}

// Rank 0's report carries rank 1's failure, tagged, as a failure of the same test.
TEST(Harness, FailureOnRankOneFailsTheJob) {
  if (!single_rank()) GTEST_SKIP() << "starts a child job; runs in the np1 variant";
  auto r = run_self({"LLMP_HARNESS_FAIL=1"},
                    {"--ranks=3", "--gtest_filter=Harness.DeliberateFailureOnRankOne"});
  EXPECT_EQ(r.status, 1) << r.output;
  for (const char* line : {
           "Harness.DeliberateFailureOnRankOne failed on rank 1:\n[rank 1] ",
           "[rank 1] Expected: (world_rank()) != (1), actual: 1 vs 1\n[rank 1] deliberate failure\n",
           "[  FAILED  ] Harness.DeliberateFailureOnRankOne (",
           " 1 FAILED TEST",
       })
    EXPECT_NE(r.output.find(line), std::string::npos) << "no '" << line << "' in:\n" << r.output;
  EXPECT_EQ(r.output.find("[rank 2]"), std::string::npos) << "rank 2 passed:\n" << r.output;
  EXPECT_EQ(r.output.find("[rank 0]"), std::string::npos) << "rank 0 passed:\n" << r.output;
}

// One rank's exception ends the job at once with its one line, instead of leaving the others in
// the collective it skipped (gtest's catching would send it on to the next test). `timeout 30`
// turns a hang into status 124, so the test fails rather than waits for Bazel's timeout.
TEST(Harness, ExceptionOnRankOneEndsTheJob) {
  if (!single_rank()) GTEST_SKIP() << "starts a child job; runs in the np1 variant";
  auto r = run_self({"LLMP_HARNESS_THROW=1"},
                    {"--ranks=3", "--gtest_filter=Harness.DeliberateThrowOnRankOne"},
                    {"timeout", "30"});
  EXPECT_NE(r.status, 124) << "the job hung:\n" << r.output;
  EXPECT_NE(r.status, 0) << r.output;
  const char* line =
      "error: rank 1: Harness.DeliberateThrowOnRankOne: uncaught exception: deliberate throw\n";
  EXPECT_NE(r.output.find(line), std::string::npos) << "no '" << line << "' in:\n" << r.output;
}

}  // namespace
