// NcclProcessGroup: the NCCL backend of ProcessGroup (process_group.h), for device tensors with
// one rank per GPU. COMPILED HERE, NEVER RUN: this machine has the CUDA toolkit and NCCL but no
// GPU, and its test needs two (README.md, "Device tensors and NCCL").
//
// Setup (NCCL user guide, "Creating a communicator"): rank 0 of the group makes an ncclUniqueId,
// the group's MPI twin broadcasts it (a u8 tensor through the host ProcessGroup interface, so
// this file calls no MPI), and every rank calls ncclCommInitRank on the device it had selected
// (cudaSetDevice(device_for_rank(...)), device_for_rank.h) before create(). Each group has its
// own CUDA stream and its own twin: a duplicate() of the MPI group it was made from, which also
// gives split() the new group's ranks (ncclCommSplit orders ranks by key, then by rank, as
// MPI_Comm_split does).
//
// Operations. Each hook makes the group's stream wait for the work already queued on the legacy
// default stream (where the layers' kernels run), issues the NCCL call on the group's stream and
// returns a Work backed by a CUDA event recorded after it: test() is cudaEventQuery, wait()
// polls it with sched_yield() under the watchdog's deadline (watchdog.h), as the MPI backend's
// mpi_wait does, and also checks ncclCommGetAsyncError (a peer's failure ends this rank too).
//   all_reduce       ncclAllReduce, in place; kAvg is ncclAvg (NCCL >= 2.10)
//   reduce_scatter   ncclReduceScatter
//   all_gather       ncclAllGather; in place when the input is chunk r (NCCL's in-place rule)
//   broadcast/reduce ncclBroadcast / ncclReduce, in place
//   reduce_scatter_v one ncclReduce per rank's chunk (root = that rank), in one ncclGroup
//   all_gather_v     ncclSend of this rank's slice to every peer + ncclRecv of theirs, in one
//                    ncclGroup; its own slice by cudaMemcpyAsync unless in place
//   all_to_all       ncclSend / ncclRecv of chunk j to and from rank j (self included), one group
//   send / recv      ncclSend / ncclRecv
//   barrier          ncclAllReduce of one float (NCCL has no barrier; torch does the same)
//   local_copy       cudaMemcpyAsync on the stream, then a stream synchronize
// Datatypes: f32 ncclFloat32, f16 ncclFloat16, bf16 ncclBfloat16, f64 ncclFloat64, u8 ncclUint8.
// Host tensors: over the twin (an MPI group), so a stage's host-side messages need no group of
// their own. Byte accounting, argument checks and the one-rank group are the base class's, as
// for MPI.
// Differences from the MPI backend, by NCCL's design: a receive cannot check the sender's count
// (NCCL carries no length; mismatched counts are undefined behaviour there), and 16-bit sums
// round as NCCL's kernels do (also per pairwise addition, in NCCL's order).
//
// Glossary: N ranks, r this rank, k elements per chunk, S bytes.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "common/comm/process_group.h"

namespace llmp {

class NcclProcessGroup final : public ProcessGroup {
 public:
  /// A NCCL communicator over the ranks of `host_group` (an MPI group: device() == kCPU, else
  /// ends every rank naming it), on the CUDA device current on each rank. Collective over
  /// host_group. Ends every rank with NCCL_CHECK's message when NCCL fails (two ranks on one GPU:
  /// "invalid usage").
  static std::shared_ptr<NcclProcessGroup> create(ProcessGroup& host_group);
  ~NcclProcessGroup() override;

  Device device() const override { return Device::kCUDA; }
  /// Device tensors go over NCCL; host tensors (a stage's loss, its routing counts) over the MPI
  /// twin, blocking or as its Work, and counted here all the same. A reduce-scatter from a device
  /// input into a host output (ZeRO-Offload's gradients into their host shard) is reduced by NCCL
  /// into a device buffer and copied down; any other operation with a host and a device tensor
  /// goes over the twin, which stages the device one (process_group_staging.h).
  bool accepts(Device d) const override { return d == Device::kCUDA || d == Device::kCPU; }
  /// The stream the collectives of this group run on (sends and receives have two more).
  cudaStream_t stream() const { return collectives_.stream; }

 protected:
  std::shared_ptr<Work> start_all_reduce(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> start_reduce_scatter(const Tensor& input, Tensor& output,
                                             ReduceOp op) override;
  std::shared_ptr<Work> start_reduce_scatter_v(const Tensor& input, Tensor& output,
                                               const std::vector<int64_t>& counts,
                                               ReduceOp op) override;
  std::shared_ptr<Work> start_all_gather(const Tensor& input, Tensor& output,
                                         bool in_place) override;
  std::shared_ptr<Work> start_all_gather_v(const Tensor& input, Tensor& output,
                                           const std::vector<int64_t>& counts,
                                           bool in_place) override;
  std::shared_ptr<Work> start_broadcast(Tensor& t, int root) override;
  std::shared_ptr<Work> start_reduce(Tensor& t, int root, ReduceOp op) override;
  std::shared_ptr<Work> start_all_to_all(const Tensor& input, Tensor& output) override;
  std::shared_ptr<Work> start_send(const Tensor& t, int dst, int tag) override;
  std::shared_ptr<Work> start_recv(Tensor& t, int src, int tag) override;
  std::shared_ptr<Work> start_barrier() override;
  std::shared_ptr<ProcessGroup> make_split(int color, int key) override;
  std::shared_ptr<ProcessGroup> make_duplicate() override;
  void local_copy(const Tensor& src, Tensor& dst) override;

 private:
  NcclProcessGroup(std::shared_ptr<ProcessGroup> twin, ncclComm_t comm);
  /// Whether an operation's tensors are (any of them) on the host: then the MPI twin carries it,
  /// staging the device one when they are mixed (ZeRO-Offload's device gradients
  /// reduce-scattered into a host shard).
  bool on_host(const Tensor& a, const Tensor& b) const;
  bool on_host(const Tensor& a) const { return on_host(a, a); }
  /// Whether a reduction goes down: its input on the device, its output on the host. Then NCCL
  /// reduces into reduced_on_device(output) and copy_down moves that to the output, on the
  /// collectives' stream: each rank's share crosses to the host once, after the GPUs reduced it
  /// (ZeRO-Offload, Ren et al. 2021, §4.1), where the twin would copy the whole input down and
  /// reduce on the host.
  static bool goes_down(const Tensor& input, const Tensor& output) {
    return input.device() == Device::kCUDA && output.device() == Device::kCPU;
  }
  /// A device buffer of output's shape and dtype (counted under kCommBuffers).
  static Tensor reduced_on_device(const Tensor& output);
  /// Queues the copy of `reduced` (device) into `output` (host) on the collectives' stream.
  void copy_down(const Tensor& reduced, Tensor& output);
  /// A communicator and the stream its operations run on.
  struct Lane {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };
  /// The lane of a message between this rank and `peer`: p2p_[0] carries every message from a
  /// lower to a higher group rank (and to itself), p2p_[1] the other way.
  const Lane& p2p_lane(int src, int dst) const { return p2p_[src <= dst ? 0 : 1]; }
  /// The lane's stream waits for the default stream's queued work (the inputs' producers).
  void after_default_stream(const Lane& lane);
  void after_default_stream() { after_default_stream(collectives_); }
  /// A Work over an event recorded on the lane's stream now, keeping `tensors` alive until it
  /// completes.
  std::shared_ptr<Work> recorded(const char* op, std::vector<Tensor> tensors, int peer,
                                 bool peer_is_source, const Lane& lane);
  std::shared_ptr<Work> recorded(const char* op, std::vector<Tensor> tensors) {
    return recorded(op, std::move(tensors), -1, false, collectives_);
  }

  std::shared_ptr<ProcessGroup> twin_;  ///< MPI group over the same ranks: bootstrap, split
  // Collectives on one communicator and stream. Sends and receives on two more, one per
  // direction: on one stream a ncclSend waits for its receiver before anything queued behind it
  // starts, so two ranks exchanging (1F1B's send_forward then recv_backward against its peer's
  // send_backward then recv_forward) would each wait for the other's queued receive. Split by
  // direction, every queue holds one direction's messages between two ranks in the order both
  // issued them (NCCL matches in issue order; it has no tags).
  Lane collectives_;
  Lane p2p_[2];
  cudaEvent_t ready_ = nullptr;  ///< recorded on the default stream before each operation
  int cuda_device_ = 0;
  Tensor barrier_word_;  ///< one device float for barrier()
};

/// ncclDataType_t of a dtype (f32, f16, bf16, f64, u8).
ncclDataType_t nccl_datatype(DType t);
/// ncclSum, ncclAvg or ncclMax.
ncclRedOp_t nccl_op(ReduceOp op);
/// NCCL_CHECK's failure path: "file:line: NCCL error: call failed: <ncclGetErrorString>", and
/// ncclGetLastError's detail when there is one; ends every rank (fail_at).
[[noreturn]] void nccl_fail(const char* file, int line, const char* call, ncclResult_t rc,
                            ncclComm_t comm);

}  // namespace llmp

/// Wraps a NCCL call: on failure names file:line, the call and NCCL's reason, and ends every rank.
#define NCCL_CHECK(call)                                                    \
  do {                                                                      \
    const ncclResult_t llmp_nccl_rc_ = (call);                              \
    if (llmp_nccl_rc_ != ncclSuccess && llmp_nccl_rc_ != ncclInProgress)    \
      ::llmp::nccl_fail(__FILE__, __LINE__, #call, llmp_nccl_rc_, nullptr); \
  } while (0)
