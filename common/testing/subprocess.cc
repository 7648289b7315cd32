// run_self: the test binary started again through /bin/sh with a cleaned environment
// (subprocess.h says what is removed and why).
//
// Glossary: status = WEXITSTATUS, or 128 + signal number.
#include "common/testing/subprocess.h"

#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "common/comm/process_group.h"
#include "common/runtime/launch.h"

namespace llmp {
namespace testing {

namespace {
std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

RunResult run_self(const std::vector<std::string>& env, const std::vector<std::string>& args,
                   const std::vector<std::string>& launcher) {
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  exe[len] = '\0';
  std::string cmd = "env";
  std::vector<std::string> unset = rank_environment_variables();  // PMI_*, LLMP_LAUNCHED, ...
  for (const char* v : {"LLMP_COMM_YIELD", "LLMP_TEST_RANKS", "XML_OUTPUT_FILE",
                        "TEST_PREMATURE_EXIT_FILE", "GTEST_OUTPUT"})
    unset.push_back(v);
  for (const std::string& v : unset) cmd += " -u " + v;
  for (const std::string& e : env) cmd += " " + quote(e);
  for (const std::string& l : launcher) cmd += " " + quote(l);
  cmd += " " + quote(exe);
  for (const std::string& a : args) cmd += " " + quote(a);
  cmd += " 2>&1";
  std::fflush(stdout);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + cmd);
  RunResult r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

bool single_rank() { return ProcessGroup::world()->size() == 1; }

}  // namespace testing
}  // namespace llmp
