// The emulated NCCL (include/nccl.h), part 1: unique ids, making, splitting and destroying
// communicators, and errors. The operations are in nccl.cc.
//
// Bootstrap, as NCCL's: the unique id names a root (NCCL: a socket address; here the MPI world
// rank of the process that made the id, with a serial number so that two ids never share
// messages). In ncclCommInitRank every other rank sends the root a Hello (its NCCL rank, world
// rank, host name and CUDA device) over MPI_COMM_WORLD with the id's tag; the root checks them
// (ranks 0..N-1 once each, the same N, no two ranks on one host's device) and answers every rank
// with the verdict and the world ranks in NCCL rank order; then all of them make the MPI
// communicator with MPI_Comm_create_group, collective over those ranks only.
//
// Glossary: N ranks of the new communicator, r its NCCL rank, w a world rank.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/emulator/nccl_internal.h"

namespace llmp::cuda::emu::nccl {
namespace {

constexpr char kMagic[] = "llmp-emulated-nccl";

struct IdFields {  // what an ncclUniqueId holds here
  char magic[sizeof(kMagic)];
  int root_world_rank;
  unsigned serial;
};
static_assert(sizeof(IdFields) <= NCCL_UNIQUE_ID_BYTES, "fits in an ncclUniqueId");

struct Hello {
  int nccl_rank, world_rank, device, nranks;
  char host[MPI_MAX_PROCESSOR_NAME];
};

struct Verdict {
  int status;  // an ncclResult_t
  char detail[256];
};

thread_local std::string last_error;

// A tag of the world's tag space for id `serial`'s bootstrap, from the top (MPI_TAG_UB is at
// least 32767; the project's own tags are small).
int bootstrap_tag(unsigned serial) {
  int* ub = nullptr;
  int flag = 0;
  EMU_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
  const int top = flag ? *ub : 32767;
  return top - static_cast<int>(serial % 4096);
}

// The root's check of every rank's Hello (indexed by NCCL rank).
Verdict judge(const std::vector<Hello>& hellos, int nranks) {
  Verdict v{ncclSuccess, ""};
  for (int r = 0; r < nranks; ++r) {
    const Hello& h = hellos[r];
    if (h.nranks != nranks || h.nccl_rank != r) {
      v.status = ncclInvalidArgument;
      std::snprintf(v.detail, sizeof(v.detail),
                    "ncclCommInitRank: world rank %d gave nranks %d (the root %d) or a rank "
                    "given twice",
                    h.world_rank, h.nranks, nranks);
      return v;
    }
    for (int q = 0; q < r; ++q)
      if (hellos[q].device == h.device && std::strcmp(hellos[q].host, h.host) == 0) {
        v.status = ncclInvalidUsage;  // NCCL's own check, same words
        std::snprintf(v.detail, sizeof(v.detail),
                      "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d of %s",
                      r, q, h.device, h.host);
        return v;
      }
  }
  return v;
}

}  // namespace

ncclResult_t fail(ncclResult_t rc, const std::string& detail) {
  last_error = "emulated NCCL: " + detail;
  return rc;
}

void mpi_fail(const char* call, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  std::fprintf(stderr, "emulated NCCL: %s failed: %s\n", call, msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

}  // namespace llmp::cuda::emu::nccl

using llmp::cuda::emu::nccl::fail;

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  using llmp::cuda::emu::nccl::IdFields;
  int init = 0;
  MPI_Initialized(&init);
  if (!init) return fail(ncclSystemError, "ncclGetUniqueId: MPI is not initialized");
  static unsigned serial = 0;
  IdFields f{};
  std::memcpy(f.magic, llmp::cuda::emu::nccl::kMagic, sizeof(f.magic));
  EMU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &f.root_world_rank));
  f.serial = serial++;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &f, sizeof(f));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  using namespace llmp::cuda::emu::nccl;  // NOLINT: this file's helpers
  IdFields f;
  std::memcpy(&f, id.internal, sizeof(f));
  if (std::memcmp(f.magic, kMagic, sizeof(kMagic)) != 0)
    return fail(ncclInvalidArgument, "ncclCommInitRank: not an id from ncclGetUniqueId");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) +
                                         " of nranks " + std::to_string(nranks));
  Hello mine{};
  mine.nccl_rank = rank;
  mine.nranks = nranks;
  EMU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &mine.world_rank));
  cudaGetDevice(&mine.device);
  int len = 0;
  EMU_MPI(MPI_Get_processor_name(mine.host, &len));
  const int tag = bootstrap_tag(f.serial);

  std::vector<int> world_ranks(nranks);
  Verdict verdict{ncclSuccess, ""};
  if (mine.world_rank == f.root_world_rank) {
    std::vector<Hello> hellos(nranks);
    std::vector<bool> seen(nranks, false);
    hellos[rank] = mine;
    seen[rank] = true;
    std::vector<int> from;
    for (int i = 1; i < nranks; ++i) {
      Hello h;
      EMU_MPI(MPI_Recv(&h, sizeof(h), MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE));
      from.push_back(h.world_rank);
      if (h.nccl_rank < 0 || h.nccl_rank >= nranks || seen[h.nccl_rank]) {
        h.nranks = -1;  // judge() reports it
        h.nccl_rank = h.nccl_rank < 0 || h.nccl_rank >= nranks ? 0 : h.nccl_rank;
      }
      seen[h.nccl_rank] = true;
      hellos[h.nccl_rank] = h;
    }
    verdict = judge(hellos, nranks);
    for (int r = 0; r < nranks; ++r) world_ranks[r] = hellos[r].world_rank;
    for (int w : from) {
      EMU_MPI(MPI_Send(&verdict, sizeof(verdict), MPI_BYTE, w, tag, MPI_COMM_WORLD));
      EMU_MPI(MPI_Send(world_ranks.data(), nranks, MPI_INT, w, tag, MPI_COMM_WORLD));
    }
  } else {
    EMU_MPI(MPI_Send(&mine, sizeof(mine), MPI_BYTE, f.root_world_rank, tag, MPI_COMM_WORLD));
    EMU_MPI(MPI_Recv(&verdict, sizeof(verdict), MPI_BYTE, f.root_world_rank, tag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE));
    EMU_MPI(MPI_Recv(world_ranks.data(), nranks, MPI_INT, f.root_world_rank, tag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE));
  }
  if (verdict.status != ncclSuccess)
    return fail(static_cast<ncclResult_t>(verdict.status), verdict.detail);

  MPI_Group world_group, group;
  EMU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  EMU_MPI(MPI_Group_incl(world_group, nranks, world_ranks.data(), &group));
  auto* c = new ncclComm;
  EMU_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &c->mpi));
  EMU_MPI(MPI_Group_free(&group));
  EMU_MPI(MPI_Group_free(&world_group));
  c->rank = rank;
  c->size = nranks;
  c->device = mine.device;
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommSplit: comm is null");
  if (config) return fail(ncclInvalidArgument, "ncclCommSplit: configs are not emulated");
  MPI_Comm sub = MPI_COMM_NULL;
  EMU_MPI(
      MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &sub));
  if (sub == MPI_COMM_NULL) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  auto* c = new ncclComm;
  c->mpi = sub;
  EMU_MPI(MPI_Comm_rank(sub, &c->rank));
  EMU_MPI(MPI_Comm_size(sub, &c->size));
  c->device = comm->device;
  *newcomm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommCount: comm is null");
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommUserRank: comm is null");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommCuDevice: comm is null");
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm is null");
  *async_error = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t /*comm*/) {
  return llmp::cuda::emu::nccl::last_error.c_str();
}
