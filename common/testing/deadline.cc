// The deadline of deadline.h: alarm(2) and a SIGALRM handler that writes a prepared line.
#include "common/testing/deadline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

namespace llmp::testing {
namespace {

char g_message[1024];

void on_deadline(int) {  // async-signal-safe: write(2) and _exit(2) only
  ssize_t ignored = write(STDERR_FILENO, g_message, std::strlen(g_message));
  (void)ignored;
  _exit(3);
}

}  // namespace

void arm_deadline(unsigned seconds, int rank, const std::string& hint) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::snprintf(g_message, sizeof g_message,
                "\n[rank %d] %s.%s still running after %u s: deadlock? %s Ending the job.\n", rank,
                info ? info->test_suite_name() : "(no test)", info ? info->name() : "", seconds,
                hint.c_str());
  std::signal(SIGALRM, on_deadline);
  alarm(seconds);
}

void disarm_deadline() { alarm(0); }

}  // namespace llmp::testing
