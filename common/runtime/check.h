// Failing fast, on every rank.
//
// Two kinds of failure, two functions:
//  - a bug or a broken invariant: LLMP_CHECK(cond, msg) prints "file:line: msg" and ends every rank
//    (MPI_Abort when MPI is up, exit(1) otherwise);
//  - bad input from the user: user_error(msg) prints the one line "error: msg" and exits 2.
//    When the same check runs on every rank, call all_ranks_ok() so exactly one rank prints and
//    every rank leaves cleanly (no hang, no wall of duplicate messages).
// MPI_CHECK wraps MPI calls the same way (common/comm/mpi_util.h, in the MPI backend).
//
// Exit codes (the README's "Exit codes" table): ExitCode below. Signals and temporary files are
// common/runtime/signals.h; an uncaught exception on a rank is report_exception below.
#pragma once

#include <string>

namespace llmp {

/// The exit status of a training run, whatever rank or launcher ends it (mpiexec passes a rank's
/// status on). Scripts may rely on these; README.md, "Exit codes", is the table users read.
enum ExitCode : int {
  kExitOk = 0,            ///< the run finished (or --help)
  kExitInternal = 1,      ///< a broken invariant (LLMP_CHECK) or an uncaught exception
  kExitBadInput = 2,      ///< bad flags, data, checkpoint or output path (user_error)
  kExitDiverged = 3,      ///< the loss became NaN or infinite; nothing saved
  kExitTimeout = 124,     ///< the --timeout watchdog fired (as timeout(1) does)
  kExitInterrupted = 130, ///< SIGINT (Ctrl-C): 128 + 2, the shell's convention
  kExitTerminated = 143,  ///< SIGTERM: 128 + 15
};

/// True between MPI_Init and MPI_Finalize.
bool mpi_up();

/// This process's rank in MPI_COMM_WORLD while MPI is up; `when_mpi_is_down` otherwise.
int world_rank(int when_mpi_is_down = 0);

/// Prints "file:line: msg" to stderr and ends every rank. Never returns.
[[noreturn]] void fail_at(const char* file, int line, const std::string& msg);

/// Prints "error: msg" to stderr and exits with status 2. When MPI is initialised and the error
/// may be local to this rank, it aborts the whole job (MPI_Abort) so no other rank waits forever.
[[noreturn]] void user_error(const std::string& msg);

/// Ends the whole job with `code` after this rank's message is printed: flushes stdout and
/// stderr, then, when MPI is up, waits briefly before MPI_Abort. The wait matters: MPI_Abort makes
/// mpiexec kill every rank, and hydra's proxies can die before forwarding what a rank just wrote
/// (seen here under load: the job failed with no message). Without MPI: exit(code).
[[noreturn]] void abort_job(int code);

/// How this layer's world-wide agreements (all_ranks_ok below, stop_if_interrupted in
/// signals.h: one small all_reduce each, every step of a training run) wait for their
/// MPI_Iallreduce. `request` is the MPI_Request*, `op` names the agreement for a message. The
/// default is MPI_Wait. The comm layer installs its watchdog's wait (common/comm/watchdog.h)
/// when --timeout is set, so a rank stopped between two steps (say, in its optimizer step) ends
/// the job after --timeout seconds instead of leaving every other rank waiting here for ever.
using WorldWait = void (*)(void* request, const char* op);
void set_world_wait(WorldWait wait);

/// Collective over MPI_COMM_WORLD (MPI must be up): the minimum of every rank's `mine`, one
/// MPI_Iallreduce completed by the installed WorldWait. `op` names it ("all_ranks_ok").
int world_min(int mine, const char* op);

/// Collective: every rank of MPI_COMM_WORLD calls it with its own `ok`. If all are ok it returns.
/// Otherwise the lowest failing rank prints "error: <its msg>", and every rank finalises MPI and
/// exits with status `code` (2, bad input, unless told otherwise). Without MPI initialised it
/// behaves like `if (!ok) { print "error: msg"; exit(code); }`.
void all_ranks_ok(bool ok, const std::string& msg, int code = kExitBadInput);

/// For a catch block or a terminate handler: prints the one line "error: rank R: <what>" (R is
/// this process's rank in MPI_COMM_WORLD, 0 without MPI) and ends the whole job with status 1
/// (abort_job), so one rank's exception never leaves the others waiting in a collective and
/// never shows as MPICH's "BAD TERMINATION" banner.
[[noreturn]] void report_exception(const std::string& what);

/// Inside a terminate handler or a catch block: the what() of the exception in flight
/// (std::current_exception), "an exception that is not a std::exception" for another type, or
/// "terminate called" when there is none.
std::string current_exception_text();

/// std::set_terminate handler: an exception nobody caught (thrown from a destructor, a noexcept
/// function or another thread) ends the job through report_exception; any other terminate prints
/// "error: rank R: terminate called" and does the same.
void install_terminate_handler();

}  // namespace llmp

#define LLMP_CHECK(cond, msg)                                                   \
  do {                                                                          \
    if (!(cond)) ::llmp::fail_at(__FILE__, __LINE__, std::string("check failed: " #cond ": ") + (msg)); \
  } while (0)
