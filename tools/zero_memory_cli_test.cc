// Runs the zero_memory binary as a user would: the figures on stdout, and one-line errors with
// exit status 2 on bad input.
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
  const std::string cmd = "tools/zero_memory " + args + " 2>&1";  // runfiles-relative path
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

TEST(ZeroMemoryCli, PrintsTable1) {
  const RunResult r = run("--params 7.5e9 --ranks 64");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* want : {"120 GB", "31.4 GB", "16.6 GB", "1.88 GB", "0.469", "52.5"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " missing from\n" << r.out;
  std::printf("%s", r.out.c_str());
}

TEST(ZeroMemoryCli, BadInputIsOneLineAndExitTwo) {
  for (const char* args : {"--params -5", "--ranks 0", "--precision fp8", "--params abc",
                           "--bogus 1"}) {
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_EQ(lines(r.out), 1) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << args << ": " << r.out;
  }
}

}  // namespace
