// Runs the planner binary as a user would: the example configs print a ranked plan, a flag
// overrides the file, and bad input is one line "error: ..." with exit status 2.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "common/testing/run_command.h"

namespace {

using llmp::testing::CommandResult;
using llmp::testing::count_lines;

CommandResult run(const std::string& args) {
  return llmp::testing::run_command("tools/plan/plan " + args);  // runfiles-relative path
}

TEST(PlanCli, ExampleConfigsPrintARankedPlan) {
  for (const char* f : {"gpt3_175b_1024_a100", "mini_1gpu", "mini_8gpu_1node"}) {
    const CommandResult r = run(std::string("--config tools/plan/examples/") + f + ".json");
    ASSERT_EQ(r.status, 0) << f << ": " << r.output;
    EXPECT_NE(r.output.find("#1  dp "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("MFU "), std::string::npos) << r.output;
  }
}

TEST(PlanCli, FlagsOverrideTheFileAndFixKnobs) {
  const CommandResult r = run("--config tools/plan/examples/gpt3_175b_1024_a100.json --tp 8 --pp 8 "
                          "--sp 0 --recompute full --top 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("#1  dp 16 pp 8 tp 8 ZeRO-"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("recompute full"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("#2 "), std::string::npos) << r.output;
}

// A held v > 1 or sp = on has no one-GPU configuration: the "one GPU alone" yardstick frees
// them rather than ending the run with "no valid configuration ... on up to 1 GPUs".
TEST(PlanCli, HeldInterleavingAndSequenceParallelismStillPrintTheOneGpuYardstick) {
  for (const char* held : {"--v 2", "--sp 1", "--zero 2"}) {
    const CommandResult r = run(std::string("--config tools/plan/examples/mini_8gpu_1node.json ") +
                                held + " --top 1");
    ASSERT_EQ(r.status, 0) << held << ": " << r.output;
    EXPECT_NE(r.output.find("#1  dp "), std::string::npos) << held << ": " << r.output;
    EXPECT_NE(r.output.find("one GPU alone: step "), std::string::npos) << held << ": " << r.output;
  }
}

TEST(PlanCli, BadInputIsOneLineAndExitTwo) {
  const struct {
    const char* args;
    const char* names;
  } cases[] = {
      {"--preset mini --batch 0", "batch 0"},
      {"--preset nano --batch 8", "nano"},
      {"--preset mini --batch 8 --efficiency 1.5", "efficiency 1.5"},
      {"--preset mini --batch 8 --nodes -1", "nodes -1"},
      {"--preset mini --batch 8 --bw-inter 0", "bw_inter 0"},
      {"--preset mini --batch 8 --recompute some", "some"},
      {"--preset mini --batch 8 --precision fp8", "fp8"},
      {"--layers 4 --channels 130 --heads 4 --vocab 256 --seq 64 --batch 8", "C 130"},
      {"--batch 8", "no model"},
      {"--config /nonexistent.json", "/nonexistent.json"},
      {"--preset mini --batch 8 --tp 3", "tp 3"},
      {"--bogus 1", "bogus"},
  };
  for (const auto& c : cases) {
    const CommandResult r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.output;
    EXPECT_EQ(count_lines(r.output), 1) << c.args << ": " << r.output;
    EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.names), std::string::npos) << c.args << ": " << r.output;
  }
}

}  // namespace
