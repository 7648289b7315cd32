// Running the test binary again as a child job, to test what can only be seen from outside: exit
// statuses, one-line errors that end every rank, the launcher's relaunch under mpiexec.
//
// The child is a fresh process, not a rank of this job: the MPI launcher's variables (PMI_*,
// hydra's local-rank pair, LLMP_LAUNCHED: common/runtime/launch.h's rank_environment_variables),
// LLMP_COMM_YIELD, LLMP_TEST_RANKS and Bazel's report files
// (XML_OUTPUT_FILE, TEST_PREMATURE_EXIT_FILE) are removed from its environment, so it relaunches
// itself under mpiexec as a test binary run by `bazel test` does, and cannot overwrite this
// test's report.
//
// Glossary: status = the child's exit status (128 + signal when killed by one).
#pragma once

#include <string>
#include <vector>

namespace llmp {
namespace testing {

struct RunResult {
  int status = -1;     ///< exit status of the child (mpiexec's when it relaunched itself)
  std::string output;  ///< stdout and stderr together
};

/// Runs /proc/self/exe with the environment assignments `env` ("NAME=value") added and `args`
/// as its arguments, behind `launcher` when given (e.g. {"mpiexec", "-n", "2"}); waits for it and
/// returns its status and output.
RunResult run_self(const std::vector<std::string>& env, const std::vector<std::string>& args,
                   const std::vector<std::string>& launcher = {});

/// True when this process is rank 0 of a 1-rank job: tests that start child jobs run only there
/// (the np1 variant), so the child has the machine to itself.
bool single_rank();

}  // namespace testing
}  // namespace llmp
