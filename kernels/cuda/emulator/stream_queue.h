// The emulator's streams (streams.cc): the one place where work runs later than the call that
// issued it. Kernels, copies and sets run when they are called (include/cuda_runtime.h); the
// emulated NCCL's operations (nccl.cc) are queued on their stream as a StreamOp, because on a GPU
// a collective waits for its peers and a rank goes on issuing work meanwhile.
//
// A stream runs its queue in order, as a GPU does: only the operation at the head has started;
// the next starts when the head is done. So a ncclSend queued ahead of a ncclRecv on one stream
// keeps the receive from starting until a peer has received the send, and two ranks that both
// send first wait for each other here as they do on a GPU (NCCL's user guide, "Point-to-point
// communication"). There is no device to move the queues on by itself: every call of the
// emulated runtime or NCCL that can observe a stream moves every queue on (progress()), as do
// MPI_Test and MPI_Wait (the emulated NCCL wraps them: nccl.cc), and a blocking wait loops on
// it. So a rank blocked in any other MPI call while a peer waits for this rank's queued work
// waits here where a GPU would not (the project polls with MPI_Test); and a wait that is not
// over after $LLMP_CUDA_EMULATOR_HANG_S seconds (default 300) ends the process naming what it
// waits for: on a GPU it would hang.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace llmp::cuda::emu {

/// One operation queued on a stream.
class StreamOp {
 public:
  virtual ~StreamOp() = default;
  /// Called once, when the operation reaches the head of its stream's queue.
  virtual void start() = 0;
  /// Whether it is complete (called after start(), until it returns true; may make progress).
  virtual bool done() = 0;
  /// What it is, for the hang message: "ncclAllReduce of 1024 float32 on rank 1 of 2".
  virtual std::string what() const = 0;
};

/// Queues `op` on `stream` (0: the legacy default stream) and moves the queues on (it starts now
/// if the stream was idle).
void enqueue(cudaStream_t stream, std::unique_ptr<StreamOp> op);
/// Starts and completes what can be: every stream's head, then its next, while they finish.
void progress();

}  // namespace llmp::cuda::emu
