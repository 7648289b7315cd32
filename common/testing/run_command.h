// Running a command line as a user would, for tests of a binary's exit status and output
// (tools/zero_memory, tools/plan): /bin/sh -c "<command> 2>&1", waited for.
#pragma once

#include <string>

namespace llmp {
namespace testing {

struct CommandResult {
  int status = -1;     ///< exit status (-1 when the shell did not exit normally)
  std::string output;  ///< stdout and stderr together
};

/// Runs `command` through the shell (popen) with stderr joined to stdout, waits for it and
/// returns its exit status and output. Relative paths are the test's runfiles directory's.
CommandResult run_command(const std::string& command);

/// The number of '\n' in `s`.
int count_lines(const std::string& s);

}  // namespace testing
}  // namespace llmp
