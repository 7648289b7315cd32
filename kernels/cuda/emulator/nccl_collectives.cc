// The emulated NCCL (include/nccl.h), part 3: the collectives and point-to-point calls. Each
// checks its arguments now, as NCCL does when it enqueues (a failure is the call's result, with
// ncclGetLastError's detail), then submits a piece (nccl_internal.h) whose post runs when its
// stream reaches it: it copies what it reads, posts the MPI operation and, where the result must
// be moved or divided, finishes when MPI is done.
//
// Glossary: N ranks, r this rank, n elements, es bytes per element.
#include <climits>
#include <cstring>
#include <memory>
#include <string>

#include "kernels/cuda/emulator/nccl_internal.h"

namespace llmp::cuda::emu::nccl {
namespace {

// ---- Argument checks -------------------------------------------------------------------------

// ncclSuccess, or ncclInvalidArgument naming what is wrong with the call's common arguments.
ncclResult_t check(const char* call, const ncclComm* comm, size_t n, ncclDataType_t t) {
  progress();  // every call moves the queues on
  if (!comm) return fail(ncclInvalidArgument, std::string(call) + ": comm is null");
  if (type_size(t) == 0)
    return fail(ncclInvalidArgument,
                std::string(call) + ": unknown datatype " + std::to_string(static_cast<int>(t)));
  if (n > static_cast<size_t>(INT_MAX))
    return fail(ncclInvalidArgument, std::string(call) + ": counts above INT_MAX not emulated");
  return ncclSuccess;
}

// ncclInvalidArgument unless [p, p + bytes) is device memory.
ncclResult_t check_buffer(const char* call, const char* name, const void* p, size_t bytes) {
  if (bytes == 0 || is_device_range(p, bytes)) return ncclSuccess;
  char where[32];
  std::snprintf(where, sizeof(where), "%p", p);
  return fail(ncclInvalidArgument, std::string(call) + ": " + name + " " + where + " (" +
                                       std::to_string(bytes) +
                                       " bytes) is not device memory (cudaMalloc)");
}

ncclResult_t check_op(const char* call, ncclRedOp_t op, ncclDataType_t t) {
  if (mpi_op(op, t) != MPI_OP_NULL) return ncclSuccess;
  return fail(ncclInvalidArgument, std::string(call) + ": reduction " +
                                       std::to_string(static_cast<int>(op)) +
                                       " on this datatype is not emulated");
}

ncclResult_t check_rank(const char* call, const char* name, int rank, const ncclComm* comm) {
  if (rank >= 0 && rank < comm->size) return ncclSuccess;
  return fail(ncclInvalidArgument, std::string(call) + ": " + name + " " + std::to_string(rank) +
                                       " of " + std::to_string(comm->size) + " ranks");
}

// The call counted (api_counts.h), once its checks passed, with its send buffer's bytes (the
// receive buffer's for ncclRecv).
void note(const char* call, size_t n, ncclDataType_t t) {
  count_call(CallKind::kNccl, call, static_cast<double>(n * type_size(t)));
}

std::string describe(const char* call, size_t n, const ncclComm* comm) {
  return std::string(call) + " of " + std::to_string(n) + " elements on rank " +
         std::to_string(comm->rank) + " of " + std::to_string(comm->size);
}

// A reduction's input, copied (pre-multiplied for ncclAvg) into a buffer the op keeps.
const void* staged_input(MpiOp& op, const void* src, size_t n, ncclDataType_t t, ncclRedOp_t red,
                         int N) {
  op.buffers.push_back(input_copy(src, n, t, red, N));
  return op.buffers.back().data();
}

#define EMU_NCCL_TRY(expr)                      \
  do {                                          \
    const ncclResult_t emu_rc_ = (expr);        \
    if (emu_rc_ != ncclSuccess) return emu_rc_; \
  } while (0)

}  // namespace
}  // namespace llmp::cuda::emu::nccl

using namespace llmp::cuda::emu::nccl;  // NOLINT: this file defines the C API over them

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  const char* call = "ncclAllReduce";
  const size_t bytes = count * type_size(datatype);
  EMU_NCCL_TRY(check(call, comm, count, datatype));
  EMU_NCCL_TRY(check_op(call, op, datatype));
  EMU_NCCL_TRY(check_buffer(call, "sendbuff", sendbuff, bytes));
  EMU_NCCL_TRY(check_buffer(call, "recvbuff", recvbuff, bytes));
  note(call, count, datatype);
  if (count == 0) return ncclSuccess;
  const MPI_Comm c = comm->mpi;
  const int N = comm->size;
  return submit(stream,
                {describe(call, count, comm),
                 [=](MpiOp& o) {
                   const void* in = staged_input(o, sendbuff, count, datatype, op, N);
                   o.requests.emplace_back();
                   EMU_MPI(MPI_Iallreduce(in, recvbuff, static_cast<int>(count), mpi_type(datatype),
                                          mpi_op(op, datatype), c, &o.requests.back()));
                 },
                 [=] {
                   if (op == ncclAvg) post_divide(recvbuff, count, datatype, N);
                 }});
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  const char* call = "ncclReduceScatter";
  EMU_NCCL_TRY(check(call, comm, recvcount, datatype));
  const size_t es = type_size(datatype), total = recvcount * comm->size;
  EMU_NCCL_TRY(check(call, comm, total, datatype));
  EMU_NCCL_TRY(check_op(call, op, datatype));
  EMU_NCCL_TRY(check_buffer(call, "sendbuff", sendbuff, total * es));
  EMU_NCCL_TRY(check_buffer(call, "recvbuff", recvbuff, recvcount * es));
  note(call, total, datatype);
  if (recvcount == 0) return ncclSuccess;
  const MPI_Comm c = comm->mpi;
  const int N = comm->size;
  return submit(stream, {describe(call, total, comm),
                         [=](MpiOp& o) {
                           const void* in = staged_input(o, sendbuff, total, datatype, op, N);
                           o.requests.emplace_back();
                           EMU_MPI(MPI_Ireduce_scatter_block(
                               in, recvbuff, static_cast<int>(recvcount), mpi_type(datatype),
                               mpi_op(op, datatype), c, &o.requests.back()));
                         },
                         [=] {
                           if (op == ncclAvg) post_divide(recvbuff, recvcount, datatype, N);
                         }});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclAllGather";
  EMU_NCCL_TRY(check(call, comm, sendcount, datatype));
  EMU_NCCL_TRY(check(call, comm, sendcount * comm->size, datatype));
  const size_t es = type_size(datatype);
  EMU_NCCL_TRY(check_buffer(call, "sendbuff", sendbuff, sendcount * es));
  EMU_NCCL_TRY(check_buffer(call, "recvbuff", recvbuff, sendcount * comm->size * es));
  note(call, sendcount, datatype);
  if (sendcount == 0) return ncclSuccess;
  const MPI_Comm c = comm->mpi;
  return submit(stream,
                {describe(call, sendcount, comm), [=](MpiOp& o) {
                   const void* in = staged_input(o, sendbuff, sendcount, datatype, ncclSum, 1);
                   o.requests.emplace_back();
                   EMU_MPI(MPI_Iallgather(in, static_cast<int>(sendcount), mpi_type(datatype),
                                          recvbuff, static_cast<int>(sendcount), mpi_type(datatype),
                                          c, &o.requests.back()));
                 }});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const char* call = "ncclBroadcast";
  EMU_NCCL_TRY(check(call, comm, count, datatype));
  EMU_NCCL_TRY(check_rank(call, "root", root, comm));
  const size_t bytes = count * type_size(datatype);
  if (comm->rank == root) EMU_NCCL_TRY(check_buffer(call, "sendbuff", sendbuff, bytes));
  EMU_NCCL_TRY(check_buffer(call, "recvbuff", recvbuff, bytes));
  note(call, count, datatype);
  if (count == 0) return ncclSuccess;
  const MPI_Comm c = comm->mpi;
  const bool is_root = comm->rank == root;
  return submit(stream, {describe(call, count, comm), [=](MpiOp& o) {
                           if (is_root && sendbuff != recvbuff)
                             std::memmove(recvbuff, sendbuff, bytes);
                           o.requests.emplace_back();
                           EMU_MPI(MPI_Ibcast(recvbuff, static_cast<int>(count), mpi_type(datatype),
                                              root, c, &o.requests.back()));
                         }});
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclReduce";
  EMU_NCCL_TRY(check(call, comm, count, datatype));
  EMU_NCCL_TRY(check_rank(call, "root", root, comm));
  EMU_NCCL_TRY(check_op(call, op, datatype));
  const size_t bytes = count * type_size(datatype);
  const bool is_root = comm->rank == root;
  EMU_NCCL_TRY(check_buffer(call, "sendbuff", sendbuff, bytes));
  if (is_root) EMU_NCCL_TRY(check_buffer(call, "recvbuff", recvbuff, bytes));  // root only
  note(call, count, datatype);
  if (count == 0) return ncclSuccess;
  const MPI_Comm c = comm->mpi;
  const int N = comm->size;
  return submit(stream, {describe(call, count, comm),
                         [=](MpiOp& o) {
                           const void* in = staged_input(o, sendbuff, count, datatype, op, N);
                           o.requests.emplace_back();
                           EMU_MPI(MPI_Ireduce(in, is_root ? recvbuff : nullptr,
                                               static_cast<int>(count), mpi_type(datatype),
                                               mpi_op(op, datatype), root, c, &o.requests.back()));
                         },
                         [=] {
                           if (is_root && op == ncclAvg) post_divide(recvbuff, count, datatype, N);
                         }});
}

// A send completes only once the peer's receive has matched it (MPI_Issend): NCCL's rendezvous,
// which is what makes two ranks that both send first on one stream wait for each other.
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclSend";
  EMU_NCCL_TRY(check(call, comm, count, datatype));
  EMU_NCCL_TRY(check_rank(call, "peer", peer, comm));
  EMU_NCCL_TRY(check_buffer(call, "sendbuff", sendbuff, count * type_size(datatype)));
  note(call, count, datatype);
  const MPI_Comm c = comm->mpi;
  return submit(stream,
                {describe(call, count, comm) + " to rank " + std::to_string(peer), [=](MpiOp& o) {
                   o.requests.emplace_back();
                   EMU_MPI(MPI_Issend(sendbuff, static_cast<int>(count), mpi_type(datatype), peer,
                                      /*tag=*/0, c, &o.requests.back()));
                 }});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclRecv";
  EMU_NCCL_TRY(check(call, comm, count, datatype));
  EMU_NCCL_TRY(check_rank(call, "peer", peer, comm));
  EMU_NCCL_TRY(check_buffer(call, "recvbuff", recvbuff, count * type_size(datatype)));
  note(call, count, datatype);
  const MPI_Comm c = comm->mpi;
  return submit(stream,
                {describe(call, count, comm) + " from rank " + std::to_string(peer), [=](MpiOp& o) {
                   o.recv_checks.push_back(
                       {o.requests.size(), static_cast<int>(count), peer, mpi_type(datatype)});
                   o.requests.emplace_back();  // a longer message: MPI_ERR_TRUNCATE
                   EMU_MPI(MPI_Irecv(recvbuff, static_cast<int>(count), mpi_type(datatype), peer,
                                     /*tag=*/0, c, &o.requests.back()));
                 }});
}
