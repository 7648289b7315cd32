// NCCL, emulated over MPI (kernels/cuda/emulator/nccl.cc): the calls the project's NCCL backend
// makes (common/comm/nccl_process_group.h), with NCCL's signatures, for a target built on
// //kernels/cuda/emulator:nccl. Each rank is an MPI process and its "device" buffers are host
// memory (include/cuda_runtime.h), so a communicator is an MPI communicator over the same ranks
// and each operation is a non-blocking MPI operation queued on its CUDA stream (stream_queue.h):
// it starts when the stream reaches it and the stream goes on when it is done.
//
// What it keeps of NCCL (the NCCL user guide and API reference, release 2.28):
// - setup: ncclGetUniqueId on one rank names a bootstrap root (here: that rank's MPI world rank
//   and a serial number), the id travels by the caller's own means, ncclCommInitRank is
//   collective over the communicator's ranks; a communicator with two ranks on one device (the
//   same host name and CUDA device) fails on every rank with ncclInvalidUsage, "Duplicate GPU
//   detected", as NCCL does. ncclCommSplit: MPI_Comm_split's order (key, then rank).
// - buffers: every buffer an operation reads or writes must be device memory (a live
//   cudaMalloc range of the whole count), else ncclInvalidArgument naming it.
// - order: operations on one stream run one after the other; a ncclSend completes only once the
//   peer's ncclRecv has matched it (MPI_Issend), so issue-order deadlocks are real here;
//   operations between ncclGroupStart and ncclGroupEnd are started together.
// - arithmetic: 16-bit sums widen each pair to fp32 and round back (per pairwise addition);
//   ncclAvg on floating types is NCCL's pre-multiplied sum: each input times 1/N (rounded to the
//   type), then summed.
// What it does not: speed, NCCL's reduction order (MPI's here), a receive shorter than what was
// sent (NCCL does not check; here it ends the process naming both counts), async errors (never
// any), configs (ncclCommSplit's config must be null).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_VERSION_CODE 22800
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNIQUE_ID_BYTES 128

struct ncclComm;
typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct ncclConfig ncclConfig_t;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
} ncclDataType_t;

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
/// Collective over the nranks ranks that call it with the same id; blocking.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
/// Collective over comm's ranks; *newcomm is null for color NCCL_SPLIT_NOCOLOR.
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
/// Always ncclSuccess here: the emulated operations fail at once or not at all.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);
const char* ncclGetErrorString(ncclResult_t result);
/// The last failed call's detail on this thread ("" if none).
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
