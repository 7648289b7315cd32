// MPI plumbing for the ProcessGroup MPI backend: MPI_CHECK's failure path, int counts, dtypes,
// kAvg's scaling and the yielding wait with the watchdog's poll (see mpi_util.h for why it yields).
//
// Glossary: N ranks; count = elements of an MPI datatype; displs = exclusive prefix sums of counts.
#include "common/comm/mpi_util.h"

#include <sched.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/comm/mpi_float16.h"
#include "common/runtime/check.h"

namespace llmp {

void mpi_fail(const char* file, int line, const char* call, int rc) {
  char err[MPI_MAX_ERROR_STRING] = "unknown MPI error";
  int len = 0;
  MPI_Error_string(rc, err, &len);
  std::fprintf(stderr, "%s:%d: [rank %d] %s failed: %s\n", file, line, world_rank(-1), call,
               err);
  abort_job(1);
}

MPI_Datatype mpi_datatype(DType t) {
  switch (t) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF16:
    case DType::kBF16: return MPI_UINT16_T;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kU8: return MPI_UINT8_T;
  }
  fail_at(__FILE__, __LINE__, "unknown dtype");
}

int mpi_count(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX)
    fail_at(__FILE__, __LINE__,
            std::string(what) + ": count " + std::to_string(n) +
                " does not fit MPI's int count (0..2147483647); split the tensor into buckets");
  return static_cast<int>(n);
}

void mpi_counts_displs(const std::vector<int64_t>& counts, const char* what, std::vector<int>* c,
                       std::vector<int>* displs) {
  c->clear();
  displs->clear();
  int64_t offset = 0;
  for (int64_t n : counts) {
    c->push_back(mpi_count(n, what));
    displs->push_back(mpi_count(offset, what));
    offset += n;
  }
  mpi_count(offset, what);  // the total must fit too: it is the largest displacement's end
}

bool mpi_yield_when_waiting() {
  static const bool yield = [] {
    const char* v = std::getenv("LLMP_COMM_YIELD");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return yield;
}

void mpi_wait(MPI_Request* request, MPI_Status* status, const WaitSite& site) {
  WaitWatchdog watchdog(site);
  const bool yield = mpi_yield_when_waiting();
  if (!yield && watchdog.idle()) {
    MPI_CHECK(MPI_Wait(request, status));
    return;
  }
  int done = 0;
  for (;;) {
    MPI_CHECK(MPI_Test(request, &done, status));
    if (done) return;
    watchdog.poll();  // past the deadline, or the process manager gone: ends the job
    if (yield) sched_yield();  // hand the core to a rank that has work; back next time slice
  }
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t == DType::kF16 || t == DType::kBF16) return mpi_float16_op(t, op);
  return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM;
}

void scale(Tensor& t, double s) {
  if (t.dtype() == DType::kF16 || t.dtype() == DType::kBF16)
    return scale_float16(t, static_cast<float>(s));
  if (t.dtype() == DType::kF64) {
    double* p = t.f64();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] *= s;
    return;
  }
  float* p = t.f32();
  const float sf = static_cast<float>(s);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] *= sf;
}

}  // namespace llmp
