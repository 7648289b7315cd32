// Tests for rank-aware logging without MPI (rank 0): what goes to stdout/stderr and in what form.
#include "common/runtime/log.h"

#include <gtest/gtest.h>

#include <string>

namespace llmp {
namespace {

TEST(Log, RankIsZeroWithoutMpi) { EXPECT_EQ(log_rank(), 0); }

TEST(Log, InfoGoesToStdoutAsABareLine) {
  ::testing::internal::CaptureStdout();
  log_info("step {} loss {:.4f}", 3, 1.23456);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "step 3 loss 1.2346\n");
}

TEST(Log, WarnGoesToStderrWithPrefix) {
  ::testing::internal::CaptureStderr();
  log_warn("bucket of {} MiB is larger than the model", 64);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "warning: bucket of 64 MiB is larger than the model\n");
}

TEST(Log, AllRanksLinesCarryTheRank) {
  ::testing::internal::CaptureStdout();
  log_all_ranks("shard [{}, {})", 0, 128);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "[rank 0] shard [0, 128)\n");
}

TEST(Log, QuietSilencesInfoOnly) {
  set_log_quiet(true);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  log_info("hidden");
  log_warn("shown");
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_log_quiet(false);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "warning: shown\n");
}

}  // namespace
}  // namespace llmp
