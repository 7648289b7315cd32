// run_self: the test binary started again through /bin/sh with a cleaned environment
// (subprocess.h says what is removed and why).
//
// Glossary: status = WEXITSTATUS, or 128 + signal number.
#include "common/testing/subprocess.h"

#include <limits.h>
#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

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
  for (const char* v : {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMI_ID", "MPI_LOCALNRANKS",
                        "MPI_LOCALRANKID", "LLMP_LAUNCHED", "LLMP_COMM_YIELD", "LLMP_TEST_RANKS",
                        "XML_OUTPUT_FILE", "TEST_PREMATURE_EXIT_FILE", "GTEST_OUTPUT"})
    cmd += std::string(" -u ") + v;
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

bool single_rank() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size == 1;
}

}  // namespace testing
}  // namespace llmp
