// An MPI-aware main() for gtest: every test binary of a multi-rank test links this instead of
// gtest_main (mpi_test.bzl does it for you).
//
//   bazel test //common/comm:process_group_test_np4   runs the binary once, with --ranks=4;
//   launch_or_init() re-executes it as `mpiexec -n 4 <binary> --ranks=4`, and the 4 ranks run
//   every test, each test on all ranks at once (a collective needs all of them).
//
// Output: only rank 0 prints, so the report reads as one ordered stream (hydra's mpiexec mixes
// the ranks' output in mid-line: it forwards whatever chunk it read). The other ranks keep their
// failure messages; after every test rank 0 gathers them and records them as failures of that
// test in its own report, each line tagged "[rank r]":
//     [ RUN      ] Suite.Test
//     mpi_gtest_main.cc:NN: Failure
//     Suite.Test failed on rank 1:
//     [rank 1] process_group_test.cc:42: Failure
//     [rank 1] Expected equality of these values: ...
//     [  FAILED  ] Suite.Test
// so gtest's summary, the XML report and the exit status include every rank's failures. The
// exit status is also all_reduced (max) over the ranks, so it is 1 on every rank, and mpiexec's
// and `bazel test`'s verdicts follow.
// LLMP_TEST_VERBOSE=1 makes the other ranks also print their failures to stderr at once (useful
// when a test hangs after a failure: the gathered copy only comes at the test's end).
//
// Writing tests for it: issue the collectives first and assert afterwards; prefer EXPECT_* over
// ASSERT_* (an ASSERT that returns on one rank only leaves the others waiting in the next
// collective until the test's timeout). A crash or LLMP_CHECK on any rank aborts the whole job,
// and so does an exception that leaves a test's body on any rank (with N > 1): gtest's own
// catching is turned off, so instead of that rank going on to the next test while the others wait
// in the collective it skipped, it prints "error: rank r: Suite.Test: uncaught exception: <what>"
// and MPI_Abort ends every rank with status 1. (EXPECT_THROW and friends still catch their own.)
//
// World size: --ranks=N (or --ranks N) on the command line, else $LLMP_TEST_RANKS, else 1.
// The harness talks over its own group, a duplicate() of the world: its messages never mix with
// a test's, and a test's world group counts none of its bytes.
// Glossary: N ranks; r = rank in the world.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/all_gather_strings.h"
#include "common/comm/process_group.h"
#include "common/runtime/check.h"
#include "common/runtime/launch.h"

namespace {

std::shared_ptr<llmp::ProcessGroup> g_group;  // the harness's own group (a duplicate of the world)
int g_rank = 0, g_size = 1;

// One f64 value over the harness's group: rank 0's (broadcast), or the largest (all_reduce max).
double broadcast0(double v) {
  llmp::Tensor t = llmp::Tensor::empty({1}, llmp::DType::kF64);
  t.f64()[0] = v;
  g_group->broadcast(t, 0);
  return t.f64()[0];
}
double max_over_ranks(double v) {
  llmp::Tensor t = llmp::Tensor::empty({1}, llmp::DType::kF64);
  t.f64()[0] = v;
  g_group->all_reduce(t, llmp::ReduceOp::kMax);
  return t.f64()[0];
}

int parse_ranks(const std::string& s) {
  char* end = nullptr;
  long n = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || n < 1 || n > 1024)
    llmp::user_error("--ranks / LLMP_TEST_RANKS must be a number of ranks in 1..1024, got '" + s +
                     "'");
  return static_cast<int>(n);
}

// --ranks=N or --ranks N, else $LLMP_TEST_RANKS, else 1. With strip, the flag is also removed
// from argv (after launching: the ranks started by mpiexec must see it too), so gtest never sees it.
int ranks_flag(int& argc, char** argv, bool strip) {
  int ranks = 0;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--ranks=", 8) == 0) {
      ranks = parse_ranks(argv[i] + 8);
    } else if (std::strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      ranks = parse_ranks(argv[++i]);
    } else if (strip) {
      argv[out++] = argv[i];
    }
  }
  if (strip) {
    argc = out;
    argv[argc] = nullptr;
  }
  if (ranks == 0) {
    const char* env = std::getenv("LLMP_TEST_RANKS");
    ranks = env ? parse_ranks(env) : 1;
  }
  return ranks;
}

// On every rank, after gtest's printer: collects this rank's failure messages during a test and,
// at its end, gathers them on rank 0, which adds them to the test's result. Gathering after each
// test also keeps the ranks in step, test by test.
class RankReport : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (g_rank == 0 || !r.failed()) return;
    std::string text = "[rank " + std::to_string(g_rank) + "] " +
                       (r.file_name() ? r.file_name() : "unknown") + ":" +
                       std::to_string(r.line_number()) + ": Failure\n" + r.message();
    std::string tagged;  // every line tagged with the rank
    for (size_t start = 0; start < text.size();) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      if (start > 0) tagged += "[rank " + std::to_string(g_rank) + "] ";
      tagged += text.substr(start, end - start) + "\n";
      start = end + 1;
    }
    failures_ += tagged;
    if (verbose_) std::fprintf(stderr, "%s", tagged.c_str());
  }

  // gtest calls OnTestEnd in reverse order of the listeners, so this runs before its printer
  // reports the test: a failure added here shows as the test's own.
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const std::vector<std::string> all = llmp::all_gather_strings(*g_group, failures_);
    failures_.clear();
    if (g_rank != 0) return;
    for (int r = 1; r < g_size; ++r)
      if (!all[r].empty())
        ADD_FAILURE() << info.test_suite_name() << "." << info.name() << " failed on rank " << r
                      << ":\n"
                      << all[r].substr(0, all[r].size() - 1);  // gtest adds the last '\n'
  }

  std::string failures_;
  const bool verbose_ = std::getenv("LLMP_TEST_VERBOSE") != nullptr;
};

// An exception out of a test body (catch_exceptions off): the one line naming the rank, the test
// and the exception, then the whole job ends (report_exception: MPI_Abort).
[[noreturn]] void on_uncaught_exception() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test =
      t ? std::string(t->test_suite_name()) + "." + t->name() + ": " : std::string();
  llmp::report_exception(test + "uncaught exception: " + llmp::current_exception_text());
}

}  // namespace

int main(int argc, char** argv) {
  llmp::launch_or_init(argc, argv, ranks_flag(argc, argv, /*strip=*/false));
  ranks_flag(argc, argv, /*strip=*/true);
  g_group = llmp::ProcessGroup::world()->duplicate();
  g_rank = g_group->rank();
  g_size = g_group->size();
  // One rank owns Bazel's files: the premature-exit marker and the XML report.
  if (g_rank != 0) unsetenv("TEST_PREMATURE_EXIT_FILE");

  ::testing::InitGoogleTest(&argc, argv);
  if (g_size > 1) {  // one rank's exception must end the job, not strand the others (see above)
    GTEST_FLAG_SET(catch_exceptions, false);
    std::set_terminate(on_uncaught_exception);
  }
  if (g_rank != 0) GTEST_FLAG_SET(output, "");
  // --gtest_list_tests prints outside the listeners: keep one copy.
  if (g_rank != 0 && GTEST_FLAG_GET(list_tests) && !std::freopen("/dev/null", "w", stdout))
    llmp::user_error("cannot silence rank " + std::to_string(g_rank) + "'s --gtest_list_tests");
  // --gtest_shuffle: every rank must draw the same order, so rank 0's seed is used by all.
  int seed = GTEST_FLAG_GET(random_seed);
  if (seed == 0) seed = static_cast<int>(std::time(nullptr) % 99991) + 1;
  seed = static_cast<int>(broadcast0(seed));
  GTEST_FLAG_SET(random_seed, seed);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (g_rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankReport);  // owned by gtest

  const int mine = RUN_ALL_TESTS() != 0 ? 1 : 0;
  const int any = static_cast<int>(max_over_ranks(mine));
  std::fflush(stdout);
  g_group.reset();
  llmp::shutdown();
  return any;
}
