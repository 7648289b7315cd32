// Shared by the emulated NCCL's two files (nccl_bootstrap.cc: communicators and errors; nccl.cc:
// the operations): what a communicator is, and how a call fails.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/emulator/stream_queue.h"

/// Runs an MPI call; on failure mpi_fail names it.
#define EMU_MPI(call)                                                                      \
  do {                                                                                     \
    const int emu_mpi_rc_ = (call);                                                        \
    if (emu_mpi_rc_ != MPI_SUCCESS) ::llmp::cuda::emu::nccl::mpi_fail(#call, emu_mpi_rc_); \
  } while (0)

/// A NCCL communicator, emulated: an MPI communicator over the same ranks in the same order.
struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1;
  int device = 0;  ///< the CUDA device current when it was made
};

namespace llmp::cuda::emu::nccl {

/// Keeps `detail` for ncclGetLastError (prefixed "emulated NCCL: ") and returns rc.
ncclResult_t fail(ncclResult_t rc, const std::string& detail);
/// An MPI call under the emulated NCCL failed: names it and ends the job (MPI_Abort).
[[noreturn]] void mpi_fail(const char* call, int rc);

// ---- Datatypes and reductions (nccl.cc) ------------------------------------------------------

/// Bytes per element (0: not a datatype).
size_t type_size(ncclDataType_t t);
/// The MPI datatype that carries t (16-bit floats as MPI_UINT16_T, reduced by mpi_op's ops).
MPI_Datatype mpi_type(ncclDataType_t t);
/// The MPI reduction for (op, t): ncclAvg reduces by a sum; a 16-bit pair is widened to fp32,
/// combined and rounded back once. MPI_OP_NULL: not emulated.
MPI_Op mpi_op(ncclRedOp_t op, ncclDataType_t t);
/// n elements of src in a new buffer; for ncclAvg on a floating type each times 1/N rounded to
/// the type, the product rounded to the type (NCCL's pre-multiplied sum).
std::vector<char> input_copy(const void* src, size_t n, ncclDataType_t t, ncclRedOp_t op, int N);
/// ncclAvg on integers: the sum divided by N on completion (NCCL's SumPostDiv).
void post_divide(void* buf, size_t n, ncclDataType_t t, int N);

// ---- Queued operations (nccl.cc) -------------------------------------------------------------

struct RecvCheck {
  size_t request;  // index into MpiOp::requests
  int expected, peer;
  MPI_Datatype type;
};

// One stream operation: pieces started together, complete when all their requests are.
class MpiOp final : public StreamOp {
 public:
  struct Piece {
    std::string what;
    std::function<void(MpiOp&)> post;  // appends to requests (and recv_checks)
    std::function<void()> finish;      // may be empty
  };
  void add(Piece p) { pieces_.push_back(std::move(p)); }
  bool empty() const { return pieces_.empty(); }
  std::vector<MPI_Request> requests;
  std::vector<RecvCheck> recv_checks;
  std::vector<std::vector<char>> buffers;  // inputs copied at start, alive until done

  void start() override {
    for (Piece& p : pieces_) p.post(*this);
  }
  bool done() override {
    int flag = 0;
    std::vector<MPI_Status> st(requests.size());
    EMU_MPI(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, st.data()));
    if (!flag) return false;
    for (const RecvCheck& c : recv_checks) {
      int got = 0;
      MPI_Get_count(&st[c.request], c.type, &got);
      if (got != c.expected) {
        std::fprintf(stderr,
                     "emulated NCCL: ncclRecv of %d elements from rank %d got %d: NCCL does not "
                     "check counts (on a GPU: a hang or wrong data)\n",
                     c.expected, c.peer, got);
        std::abort();
      }
    }
    for (Piece& p : pieces_)
      if (p.finish) p.finish();
    buffers.clear();
    return true;
  }
  std::string what() const override {
    std::string s;
    for (const Piece& p : pieces_) s += (s.empty() ? "" : " + ") + p.what;
    return s;
  }

 private:
  std::vector<Piece> pieces_;
};

/// Queues `piece` on `stream` as an operation of its own, or keeps it for ncclGroupEnd.
ncclResult_t submit(cudaStream_t stream, MpiOp::Piece piece);

}  // namespace llmp::cuda::emu::nccl
