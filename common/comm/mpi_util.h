// MPI plumbing shared by the MPI backend of ProcessGroup: error checks, int counts, dtypes, and a
// request wait that yields the CPU while it polls.
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
// Glossary: N ranks in a group; "count" = number of elements of the MPI datatype.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// MPI datatype of one element: MPI_FLOAT for f32, MPI_UINT16_T for f16 and bf16 (those are
/// only moved, never added, so a 16-bit integer type carries them bit for bit).
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

/// Completes `request` (MPI_Wait, or MPI_Test + sched_yield() when mpi_yield_when_waiting()).
/// Every blocking collective of ProcessGroup is its non-blocking form plus this wait.
void mpi_wait(MPI_Request* request, MPI_Status* status = MPI_STATUS_IGNORE);

/// MPI_SUM for kSum and kAvg (kAvg divides afterwards), MPI_MAX for kMax.
MPI_Op mpi_op(ReduceOp op);

/// Preconditions of every operation, failing with the op name and the tensor's description:
/// a host tensor, and f32 when `reduces` (the operation adds or compares elements).
void check_comm_tensor(const Tensor& t, const char* op, bool reduces);

/// True when the byte ranges of `a` and `b` intersect (MPI forbids aliased send and receive
/// buffers unless MPI_IN_PLACE is used).
bool overlaps(const Tensor& a, const Tensor& b);

/// t *= s, element-wise on a host f32 tensor (kAvg's division by N).
void scale_f32(Tensor& t, float s);

}  // namespace llmp
