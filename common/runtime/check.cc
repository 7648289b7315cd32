#include "common/runtime/check.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

namespace llmp {

bool mpi_up() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

int world_rank(int when_mpi_is_down) {
  int rank = when_mpi_is_down;
  if (mpi_up()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::string current_exception_text() {
  std::exception_ptr e = std::current_exception();
  if (!e) return "terminate called";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

namespace {
[[noreturn]] void on_terminate() { report_exception(current_exception_text()); }
}  // namespace

void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (mpi_up()) {
    // Let mpiexec's proxy forward the bytes still in its pipe before MPI_Abort kills the job.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::exit(code);
}

void fail_at(const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "%s:%d: %s\n", file, line, msg.c_str());
  abort_job(kExitInternal);
}

void user_error(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  abort_job(kExitBadInput);
}

void report_exception(const std::string& what) {
  std::string line = what;  // keep the contract of one line
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "error: rank %d: %s\n", world_rank(), line.c_str());
  abort_job(kExitInternal);
}

void install_terminate_handler() { std::set_terminate(on_terminate); }

namespace {
void mpi_wait_plain(void* request, const char*) {
  MPI_Wait(static_cast<MPI_Request*>(request), MPI_STATUS_IGNORE);
}
WorldWait g_world_wait = mpi_wait_plain;
}  // namespace

void set_world_wait(WorldWait wait) { g_world_wait = wait ? wait : mpi_wait_plain; }

int world_min(int mine, const char* op) {
  int out = mine;
  MPI_Request request;
  MPI_Iallreduce(&mine, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &request);
  g_world_wait(&request, op);
  return out;
}

void all_ranks_ok(bool ok, const std::string& msg, int code) {
  if (!mpi_up()) {
    if (ok) return;
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    std::fflush(stderr);
    std::exit(code);
  }
  const int rank = world_rank();
  // The lowest failing rank (or INT_MAX when none fails) is found with one all_reduce(min).
  const int first = world_min(ok ? 0x7fffffff : rank, "all_ranks_ok");
  if (first == 0x7fffffff) return;
  if (rank == first) {
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    std::fflush(stderr);
  }
  MPI_Finalize();
  std::exit(code);
}

}  // namespace llmp
