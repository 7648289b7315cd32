// Runs the planner binary as a user would: the example configs print a ranked plan, a flag
// overrides the file, and bad input is one line "error: ..." with exit status 2.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace {

struct RunResult {
  int status;
  std::string out;  // stdout and stderr
};

RunResult run(const std::string& args) {
  const std::string cmd = "tools/plan/plan " + args + " 2>&1";  // runfiles-relative path
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  RunResult r{-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(PlanCli, ExampleConfigsPrintARankedPlan) {
  for (const char* f : {"gpt3_175b_1024_a100", "mini_1gpu", "mini_8gpu_1node"}) {
    const RunResult r = run(std::string("--config tools/plan/examples/") + f + ".json");
    ASSERT_EQ(r.status, 0) << f << ": " << r.out;
    EXPECT_NE(r.out.find("#1  dp "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("MFU "), std::string::npos) << r.out;
  }
}

TEST(PlanCli, FlagsOverrideTheFileAndFixKnobs) {
  const RunResult r = run("--config tools/plan/examples/gpt3_175b_1024_a100.json --tp 8 --pp 8 "
                          "--sp 0 --recompute full --top 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("#1  dp 16 pp 8 tp 8 ZeRO-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recompute full"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("#2 "), std::string::npos) << r.out;
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
    const RunResult r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
    EXPECT_EQ(lines(r.out), 1) << c.args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.names), std::string::npos) << c.args << ": " << r.out;
  }
}

}  // namespace
