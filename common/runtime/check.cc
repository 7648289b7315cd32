#include "common/runtime/check.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace llmp {

namespace {
bool mpi_up() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}
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
  abort_job(1);
}

void user_error(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  abort_job(2);
}

void all_ranks_ok(bool ok, const std::string& msg) {
  if (!mpi_up()) {
    if (!ok) user_error(msg);
    return;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // The lowest failing rank (or INT_MAX when none fails) is found with one all_reduce(min).
  int mine = ok ? 0x7fffffff : rank, first = 0;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == 0x7fffffff) return;
  if (rank == first) {
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    std::fflush(stderr);
  }
  MPI_Finalize();
  std::exit(2);
}

}  // namespace llmp
