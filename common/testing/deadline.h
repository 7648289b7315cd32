// A deadline for one gtest test: a test still running after `seconds` ends the process with
// a line naming the rank, the test and a hint, rather than hanging until Bazel's timeout kills
// it without a word. What the labs whose bugs deadlock use (a blocking send round a ring, a
// rank that waits for the others inside a backward hook): arm it in SetUp, disarm in TearDown.
//
//   [rank 1] DdpBuckets.NoRankWaits... still running after 60 s: deadlock? <hint> Ending the job.
//
// SIGALRM's handler writes the line and _exit(3)s: only async-signal-safe calls. One deadline
// per process at a time (alarm(2)); the message is cut at 1,023 bytes.
#pragma once

#include <string>

namespace llmp::testing {

/// Ends the process with exit status 3 and the message above on stderr if the current gtest
/// test is still running `seconds` from now (≥ 1). rank: this process's rank, for the message.
/// Call from a test fixture's SetUp (it reads the current test's name).
void arm_deadline(unsigned seconds, int rank, const std::string& hint);

/// Cancels the armed deadline (TearDown).
void disarm_deadline();

}  // namespace llmp::testing
