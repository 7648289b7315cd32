// Failing fast, on every rank.
//
// Two kinds of failure, two functions:
//  - a bug or a broken invariant: LLMP_CHECK(cond, msg) prints "file:line: msg" and ends every rank
//    (MPI_Abort when MPI is up, exit(1) otherwise);
//  - bad input from the user: user_error(msg) prints the one line "error: msg" and exits 2.
//    When the same check runs on every rank, call all_ranks_ok() so exactly one rank prints and
//    every rank leaves cleanly (no hang, no wall of duplicate messages).
// MPI_CHECK wraps MPI calls the same way (common/comm/mpi_util.h, in the MPI backend).
#pragma once

#include <string>

namespace llmp {

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

/// Collective: every rank of MPI_COMM_WORLD calls it with its own `ok`. If all are ok it returns.
/// Otherwise the lowest failing rank prints "error: <its msg>", and every rank finalises MPI and
/// exits with status 2. Without MPI initialised it behaves like `if (!ok) user_error(msg)`.
void all_ranks_ok(bool ok, const std::string& msg);

}  // namespace llmp

#define LLMP_CHECK(cond, msg)                                                   \
  do {                                                                          \
    if (!(cond)) ::llmp::fail_at(__FILE__, __LINE__, std::string("check failed: " #cond ": ") + (msg)); \
  } while (0)
