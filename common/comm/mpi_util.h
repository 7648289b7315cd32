// MPI plumbing shared by the MPI backend of ProcessGroup (mpi_process_group.h): MPI_CHECK, int
// counts, dtypes, MpiWork (a request and what must outlive it), and a request wait that yields
// the CPU while it polls. Only the backend's files and its tests include this header.
//
// Why the yielding wait: MPICH (ch4:ucx) busy-polls inside every blocking call. With more
// runnable processes than cores (4 ranks on a 2-core laptop or CI box, or 2 ranks while Bazel
// compiles next to them) a waiting rank burns its whole time slice spinning while the rank it
// waits for is descheduled, so one small all_reduce costs scheduler ticks (10-25 ms) instead of
// ~10 µs. None of MPICH's or UCX's environment settings fix this (MPIR_CVAR_POLLS_BEFORE_YIELD is
// read by ch3 only; MPIR_CVAR_ASYNC_PROGRESS adds a spinning thread; UCX_TLS and
// MPIR_CVAR_CH4_SHM change nothing). Issuing the non-blocking form and polling MPI_Test with
// sched_yield() between polls hands the core to the rank that has work: 4 ranks on 2 cores,
// 4 KiB all_reduce 10.7 ms -> 0.2 ms (quiet machine), 3-8x on a loaded one. Alone on its core,
// sched_yield() returns at once, so the cost there is a syscall per poll (a few µs per call).
// The same loop runs the watchdog (watchdog.h): a wait past --timeout ends the job (exit 124).
// Glossary: N ranks in a group; "count" = number of elements of the MPI datatype.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/comm/process_group_staging.h"
#include "common/comm/watchdog.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// MPI datatype of one element: MPI_FLOAT for f32, MPI_DOUBLE for f64, MPI_UINT8_T for u8,
/// MPI_UINT16_T for f16 and bf16 (a 16-bit integer type carries them bit for bit; they are added
/// only by the user-defined ops of mpi_float16.h, never by MPI's predefined ones).
MPI_Datatype mpi_datatype(DType t);

/// `n` as an MPI count (int). Ends every rank with "<what>: count n does not fit MPI's int count
/// (max 2147483647)" when it does not; split the tensor into smaller buckets then.
int mpi_count(int64_t n, const char* what);

/// Counts as ints (each checked by mpi_count) and their exclusive prefix sums (displacements).
void mpi_counts_displs(const std::vector<int64_t>& counts, const char* what, std::vector<int>* c,
                       std::vector<int>* displs);

/// True unless LLMP_COMM_YIELD=0 (then waits are MPI_Wait, MPICH's busy-poll: the baseline
/// all_reduce_bench compares against). Read once.
bool mpi_yield_when_waiting();

/// Completes `request`: MPI_Test in a loop, with sched_yield() between tests when
/// mpi_yield_when_waiting(), and the watchdog's poll (watchdog.h) after each test, which ends the
/// job naming `site` when the wait passes comm_timeout(). Plain MPI_Wait only when neither
/// yielding nor the watchdog is on. Every blocking collective of ProcessGroup is its
/// non-blocking form plus this wait.
void mpi_wait(MPI_Request* request, MPI_Status* status, const WaitSite& site);

/// The reduction of elements of dtype `t`: for f32 and f64, MPI_SUM for kSum and kAvg (kAvg
/// divides afterwards) and MPI_MAX for kMax; for f16 and bf16 the user-defined ops of
/// mpi_float16.h (each pairwise sum widened to f32 and rounded back, or the max).
MPI_Op mpi_op(ReduceOp op, DType t);

/// t *= s, element-wise on a host f32, f64, f16 or bf16 tensor (kAvg's division by N). f32 and
/// 16-bit multiply by float(s), 16-bit in f32 on widened elements rounded back.
void scale(Tensor& t, double s);

/// One MPI request and everything MPI may still read or write until it completes: the tensors
/// (their storage is reference counted, so holding a Tensor keeps the bytes alive) and the
/// counts/displacement arrays of the v-collectives (MPI reads them during the operation).
/// Completion (wait, or a test that finds it done) divides `average` by `ranks` (kAvg), checks
/// a receive's length, then copies staged results up to their device tensors. Destroying it before completion waits (MPI-3.1 §5.12: a pending
/// non-blocking collective cannot be cancelled or freed). Defined in process_group_async.cc.
class MpiWork final : public Work {
 public:
  MPI_Request request = MPI_REQUEST_NULL;  ///< MPI_REQUEST_NULL: complete at once
  std::vector<Tensor> keep_alive;
  std::vector<int> counts, displs;
  Tensor average;            ///< divided by `ranks` on completion (kAvg); undefined otherwise
  int ranks = 1;
  int64_t expect_recv = -1;  ///< irecv: elements expected; checked against the status
  std::string what;          ///< irecv: "recv on rank 0 from rank 1 (tag 0)"
  /// The operation, its group (which must outlive this Work) and peer, for the watchdog;
  /// site.op is replaced by the caller's set_label() when there is one.
  WaitSite site;
  /// Device tensors staged through host buffers (process_group_staging.h): their copies up and
  /// buffers, settled on completion after the kAvg division and the receive check.
  StagingDebt staging;

  ~MpiWork() override;
  void wait() override;
  bool test() override;

 private:
  void finish(const MPI_Status& status);
  bool done_ = false;
};

/// An MpiWork that keeps `tensors` alive until it completes and, when op is kAvg, then divides
/// `average` by `ranks`. Its request is for the caller to fill (MPI_I...(..., &w->request)).
std::shared_ptr<MpiWork> mpi_work(std::vector<Tensor> tensors, ReduceOp op = ReduceOp::kSum,
                                  const Tensor& average = Tensor(), int ranks = 1);

}  // namespace llmp

/// Wraps an MPI call: on failure prints file:line, the call and MPI's error string, ends all ranks.
/// (Groups set MPI_ERRORS_RETURN on their communicator, so errors come back as return codes.)
#define MPI_CHECK(call)                                                              \
  do {                                                                               \
    int mpi_check_rc_ = (call);                                                      \
    if (mpi_check_rc_ != MPI_SUCCESS) ::llmp::mpi_fail(__FILE__, __LINE__, #call, mpi_check_rc_); \
  } while (0)

namespace llmp {
/// MPI_CHECK's failure path: "file:line: [rank r] call failed: MPI's message", then abort_job(1).
[[noreturn]] void mpi_fail(const char* file, int line, const char* call, int rc);
}  // namespace llmp
