// launch_or_init: re-executes the binary under mpiexec when it was started as a single process
// (see launch.h for the protocol and the environment variables).
//
// Glossary: N = requested world size; exe = /proc/self/exe, the binary now running.
#include "common/runtime/launch.h"

#include <limits.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/runtime/check.h"

namespace llmp {

namespace {

bool env_set(const char* name) { return std::getenv(name) != nullptr; }

bool executable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// LLMP_MPIEXEC, else the first executable `mpiexec` on PATH; "" when there is none.
std::string find_mpiexec() {
  if (const char* forced = std::getenv("LLMP_MPIEXEC")) return forced;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/mpiexec";
    if (executable(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

// Replaces this process with `mpiexec -n N -bind-to none exe args...`. Never returns.
[[noreturn]] void relaunch(int argc, char** argv, int world_size) {
  if (env_set("LLMP_LAUNCHED"))
    user_error("started by mpiexec from launch_or_init, yet no PMI_RANK/PMI_SIZE/PMI_FD is set: "
               "the mpiexec used is not MPICH's hydra (set LLMP_MPIEXEC to MPICH's mpiexec)");
  const std::string mpiexec = find_mpiexec();
  if (mpiexec.empty()) {
    const char* path = std::getenv("PATH");
    user_error("cannot start " + std::to_string(world_size) + " ranks: mpiexec not found on PATH (" +
               (path ? path : "unset") + "); install mpich (tools/setup.sh) or set LLMP_MPIEXEC");
  }
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) user_error(std::string("cannot read /proc/self/exe: ") + std::strerror(errno));
  exe[len] = '\0';

  setenv("LLMP_LAUNCHED", "1", 1);
  // The ranks' stdout is hydra's pipe, not the user's terminal: tell them what it really is, so
  // the progress bar (common/runtime/progress.h) still draws in place on a terminal.
  if (isatty(STDOUT_FILENO)) setenv("LLMP_STDOUT_IS_TTY", "1", 1);

  // Hydra passes the whole environment on to the ranks (-genvall is its default).
  const std::string n = std::to_string(world_size);
  std::vector<const char*> args = {mpiexec.c_str(), "-n", n.c_str(), "-bind-to", "none", exe};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execv(mpiexec.c_str(), const_cast<char* const*>(args.data()));
  user_error("cannot run " + mpiexec + ": " + std::strerror(errno));
}

}  // namespace

bool started_by_mpiexec() {
  return env_set("PMI_RANK") || env_set("PMI_SIZE") || env_set("PMI_FD") || env_set("PMIX_RANK") ||
         env_set("OMPI_COMM_WORLD_SIZE");
}

std::vector<std::string> rank_environment_variables() {
  return {"PMI_RANK", "PMI_SIZE",        "PMI_FD",          "PMI_PORT",
          "PMI_ID",   "MPI_LOCALNRANKS", "MPI_LOCALRANKID", "LLMP_LAUNCHED"};
}

int launch_or_init(int& argc, char**& argv, int world_size) {
  const char* no_launch = std::getenv("LLMP_NO_LAUNCH");
  const bool may_launch = !(no_launch && std::strcmp(no_launch, "1") == 0);
  if (world_size > 1 && may_launch && !started_by_mpiexec()) relaunch(argc, argv, world_size);

  int init = 0;
  MPI_Initialized(&init);
  if (!init && MPI_Init(&argc, &argv) != MPI_SUCCESS) user_error("MPI_Init failed");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Every rank sees the same sizes: all_ranks_ok prints once and ends every rank cleanly.
  all_ranks_ok(world_size <= 0 || size == world_size,
               "this job has " + std::to_string(size) + " rank" + (size == 1 ? "" : "s") +
                   (started_by_mpiexec() ? " (mpiexec -n " + std::to_string(size) + ")"
                                         : " (not started by mpiexec, LLMP_NO_LAUNCH=1)") +
                   " but the requested world size is " + std::to_string(world_size));
  return rank;
}

void shutdown() {
  if (mpi_up()) MPI_Finalize();
}

}  // namespace llmp
