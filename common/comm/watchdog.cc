// WaitWatchdog (watchdog.h): the deadline of one wait, the check that the process manager is
// still there, and the test hook LLMP_TEST_STALL.
//
// Glossary: w world rank; s seconds on the steady clock.
#include "common/comm/watchdog.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/runtime/check.h"
#include "common/runtime/launch.h"

namespace llmp {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The parent at load time: hydra's proxy under mpiexec. Read before main(), when it is sure to
// be the process that started this one.
const pid_t g_parent = getppid();

// When the parent is next checked: process-wide, since most waits end at their first test.
double g_next_parent_check_s = 0;

int world_rank_of(const WaitSite& s) {
  if (s.group) return s.group->world_ranks()[s.group->rank()];
  return world_rank(-1);  // a site without a group: the world (check.h's agreements)
}

// LLMP_TEST_STALL=<w>:<op>: rank w stops itself the first time it waits on `op`.
void maybe_stall_for_test(const WaitSite& s) {
  static const char* spec = std::getenv("LLMP_TEST_STALL");
  static bool stalled = false;
  if (!spec || stalled) return;
  const char* colon = std::strchr(spec, ':');
  if (!colon || std::atoi(spec) != world_rank_of(s) || std::strcmp(colon + 1, s.op) != 0) return;
  stalled = true;
  std::fprintf(stderr, "[LLMP_TEST_STALL] rank %d stops in %s\n", world_rank_of(s), s.op);
  std::fflush(stderr);
  raise(SIGSTOP);
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

}  // namespace

std::string describe(const WaitSite& s) {
  std::string out = s.op;
  if (!s.group) return out + " over the world (every rank)";
  const std::vector<int>& w = s.group->world_ranks();
  if (s.peer >= 0 && s.peer < static_cast<int>(w.size())) {
    out += (s.peer_is_source ? " from rank " : " to rank ") + std::to_string(w[s.peer]) + " (" +
           s.group->name() + ")";
    return out;
  }
  out += " over the " + s.group->name() + " (world ranks ";
  for (size_t i = 0; i < w.size(); ++i) out += (i ? "," : "") + std::to_string(w[i]);
  return out + ")";
}

WaitWatchdog::WaitWatchdog(const WaitSite& site) : site_(site) {
  maybe_stall_for_test(site);
  const double timeout = comm_timeout();
  const bool watch_parent = started_by_mpiexec();
  idle_ = timeout <= 0 && !watch_parent;
  if (idle_) return;
  watch_parent_ = watch_parent;
  start_s_ = now_s();
  const int w = std::max(0, world_rank_of(site));
  deadline_s_ = timeout > 0 ? start_s_ + timeout + 0.5 * std::min(w, 8) : 0;
  check_parent(start_s_);
}

void WaitWatchdog::poll() {
  if (idle_) return;
  const double t = now_s();
  if (deadline_s_ > 0 && t > deadline_s_) {
    std::fprintf(stderr, "error: rank %d: timed out after %s s in %s; a rank stopped or hung\n",
                 world_rank_of(site_), seconds(comm_timeout()).c_str(), describe(site_).c_str());
    abort_job(kExitTimeout);
  }
  check_parent(t);
}

void WaitWatchdog::check_parent(double t) {
  if (watch_parent_ && t > g_next_parent_check_s) {
    g_next_parent_check_s = t + 0.1;
    if (getppid() != g_parent) {
      std::fprintf(stderr,
                   "error: rank %d: the process manager (pid %d) is gone; this rank stops (it "
                   "was waiting in %s)\n",
                   world_rank_of(site_), static_cast<int>(g_parent), describe(site_).c_str());
      std::fflush(stderr);
      std::_Exit(kExitTimeout);  // no MPI_Abort: there is no process manager left to carry it out
    }
  }
}

}  // namespace llmp
