// Runs the zero_memory binary as a user would: the figures on stdout, and one-line errors with
// exit status 2 on bad input.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "common/testing/run_command.h"

namespace {

using llmp::testing::CommandResult;
using llmp::testing::count_lines;

CommandResult run(const std::string& args) {
  return llmp::testing::run_command("tools/zero_memory " + args);  // runfiles-relative path
}

TEST(ZeroMemoryCli, PrintsTable1) {
  const CommandResult r = run("--params 7.5e9 --ranks 64");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* want : {"120 GB", "31.4 GB", "16.6 GB", "1.88 GB", "0.469", "52.5"})
    EXPECT_NE(r.output.find(want), std::string::npos) << want << " missing from\n" << r.output;
  std::printf("%s", r.output.c_str());
}

// --precision fp32 without --k: K = 8 (Adam's m and v in fp32, no master copy); a --k given
// wins over that default, even when it is the mixed-precision default 12.
TEST(ZeroMemoryCli, Fp32DefaultsKTo8UnlessKIsGiven) {
  const CommandResult fp32 = run("--params 1e9 --ranks 64 --precision fp32");
  ASSERT_EQ(fp32.status, 0) << fp32.output;
  EXPECT_NE(fp32.output.find("K = 8 "), std::string::npos) << fp32.output;
  EXPECT_NE(fp32.output.find("(4+4+K)Ψ              16 GB"), std::string::npos) << fp32.output;
  const CommandResult k12 = run("--params 1e9 --ranks 64 --precision fp32 --k 12");
  ASSERT_EQ(k12.status, 0) << k12.output;
  EXPECT_NE(k12.output.find("K = 12 "), std::string::npos) << k12.output;
  EXPECT_NE(k12.output.find("(4+4+K)Ψ              20 GB"), std::string::npos) << k12.output;
}

TEST(ZeroMemoryCli, BadInputIsOneLineAndExitTwo) {
  for (const char* args : {"--params -5", "--ranks 0", "--precision fp8", "--params abc",
                           "--bogus 1"}) {
    const CommandResult r = run(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.output;
    EXPECT_EQ(count_lines(r.output), 1) << args << ": " << r.output;
    EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << args << ": " << r.output;
  }
}

}  // namespace
