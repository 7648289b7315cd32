// The watchdog: a rank that waits too long for a collective, a send or a receive ends the whole
// job with one line, instead of hanging it. PyTorch's ProcessGroupNCCL does the same with its
// `timeout` (default 10 min) and its watchdog thread; here the check runs inside the backend's
// own wait loop (the MPI backend polls MPI_Test and yields, mpi_util.h), so no thread is needed.
//
// A wait that passes the deadline prints, on the waiting rank,
//   error: rank 0: timed out after 5 s in recv_backward from rank 1 (pipeline group); a rank
//   stopped or hung
// and ends the job with exit status 124 (as timeout(1) does; mpiexec passes it on). Peers are
// named by their world rank. When several ranks wait on the same stopped peer they would all
// time out together; rank w's deadline is therefore comm_timeout() + 0.5·min(w, 8) s, so the
// lowest waiting rank speaks first and its abort ends the others before they print.
//
// Headless ranks: when the process manager that started this rank (hydra's proxy, the parent
// process) dies, the rank is re-parented and nobody would ever collect it. A rank started by
// mpiexec notices in the same loop (getppid() differs from the parent it started with), prints
// "error: rank 1: the process manager (pid 1234) is gone; this rank stops" and exits 124.
//
// Test hook (for tests only): LLMP_TEST_STALL=<world rank>:<operation> makes that rank stop
// itself (SIGSTOP) the first time it waits on that operation, e.g. "1:recv_forward" or
// "1:all_reduce"; tests/watchdog_test.sh uses it to stall one rank of a real run.
//
// Glossary: w world rank of this process; deadline = start of the wait + comm_timeout().
#pragma once

#include <string>

#include "common/comm/process_group.h"

namespace llmp {

/// What a wait is for: the operation, its group, and for point to point the other end.
struct WaitSite {
  const char* op = "wait";              ///< "all_reduce", "recv", or the caller's label
  const ProcessGroup* group = nullptr;  ///< the group it runs over; null: MPI_COMM_WORLD itself
  int peer = -1;                        ///< group rank of the other end (send, recv); -1: none
  bool peer_is_source = true;           ///< recv: "from rank p"; send: "to rank p"
};

/// "recv_forward from rank 0 (pipeline group)", "all_reduce over the data-parallel group (world
/// ranks 0,1,2,3)": the site as the watchdog's message names it (peers as world ranks).
std::string describe(const WaitSite& site);

/// One wait's deadline. Construct it when the wait starts, call poll() between tests of the
/// request; poll() ends the job as described above when the deadline passed or the process
/// manager is gone (checked at construction too). Cheap: a steady-clock read per call,
/// getppid() at most every 100 ms.
class WaitWatchdog {
 public:
  explicit WaitWatchdog(const WaitSite& site);
  void poll();
  /// True when there is nothing to check (timeout off and not started by a launcher): the
  /// backend may then block in its own wait (MPI_Wait).
  bool idle() const { return idle_; }

 private:
  /// Ends the process when the parent changed; reads getppid() at most every 100 ms, counted
  /// over all waits (most end at their first test, so a per-wait timer would never fire).
  void check_parent(double t);
  const WaitSite& site_;
  double start_s_ = 0, deadline_s_ = 0;
  bool idle_ = true, watch_parent_ = false;
};

}  // namespace llmp
