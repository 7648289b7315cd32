// NcclProcessGroup (nccl_process_group.h), part 1: creation from an MPI group (the unique id
// broadcast), NcclWork (a CUDA event polled under the watchdog), split and duplicate
// (ncclCommSplit), the datatype and op tables and NCCL_CHECK's failure path. The hooks are in
// nccl_collectives.cc. Compiled here, never run (no GPU).
//
// Glossary: N ranks, r this rank.
#include "common/comm/nccl_process_group.h"

#include <sched.h>

#include <cstring>
#include <string>

#include "common/comm/backend.h"
#include "common/comm/watchdog.h"
#include "common/runtime/check.h"
#include "kernels/cuda/cuda_check.h"

namespace llmp {

namespace {

// One NCCL operation: an event recorded on the group's stream after it, and what must stay
// alive until the device is done with it.
class NcclWork final : public Work {
 public:
  NcclWork(cudaEvent_t event, ncclComm_t comm, std::vector<Tensor> keep_alive, WaitSite site)
      : event_(event), comm_(comm), keep_alive_(std::move(keep_alive)), site_(site) {}
  ~NcclWork() override {
    if (!done_) wait();  // the device may still read or write the tensors
    cudaEventDestroy(event_);
  }
  bool test() override {
    if (done_) return true;
    if (cuda::event_done(event_)) {
      done_ = true;
      keep_alive_.clear();
      return true;
    }
    ncclResult_t async = ncclSuccess;  // a peer that failed or aborted: end here too
    NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress)
      nccl_fail(__FILE__, __LINE__, "ncclCommGetAsyncError", async, comm_);
    return false;
  }
  void wait() override {
    if (done_) return;
    if (label_) site_.op = label_;
    WaitWatchdog watchdog(site_);
    while (!test()) {
      watchdog.poll();  // past comm_timeout(): ends the job naming the operation and group
      sched_yield();
    }
  }

 private:
  cudaEvent_t event_;
  ncclComm_t comm_;
  std::vector<Tensor> keep_alive_;
  WaitSite site_;
  bool done_ = false;
};

}  // namespace

[[noreturn]] void nccl_fail(const char* file, int line, const char* call, ncclResult_t rc,
                            ncclComm_t comm) {
  std::string msg = std::string("NCCL error: ") + call + " failed: " + ncclGetErrorString(rc);
  const char* detail = ncclGetLastError(comm);
  if (detail && *detail) msg += std::string(" (") + detail + ")";
  fail_at(file, line, msg);
}

ncclDataType_t nccl_datatype(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF64:
      return ncclFloat64;
    case DType::kU8:
      return ncclUint8;
  }
  fail_at(__FILE__, __LINE__, "unknown dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;  // the sum times 1/N, in NCCL's kernel
    case ReduceOp::kMax:
      return ncclMax;
  }
  fail_at(__FILE__, __LINE__, "unknown reduce op");
}

std::shared_ptr<NcclProcessGroup> NcclProcessGroup::create(ProcessGroup& host_group) {
  if (host_group.device() != Device::kCPU)
    fail_at(__FILE__, __LINE__,
            "NcclProcessGroup::create: needs a host (MPI) group to broadcast the unique id, got "
            "a group of " +
                std::string(to_string(host_group.device())) + " tensors");
  // A twin of our own, so the bootstrap's messages never meet the caller's.
  std::shared_ptr<ProcessGroup> twin = host_group.duplicate();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (twin->rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  Tensor bytes = Tensor::zeros({static_cast<int64_t>(sizeof(id))}, DType::kU8);
  std::memcpy(bytes.raw(), &id, sizeof(id));
  twin->broadcast(bytes, 0);  // rank 0's id to every rank (128 bytes)
  std::memcpy(&id, bytes.raw(), sizeof(id));
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, twin->size(), id, twin->rank()));
  return std::shared_ptr<NcclProcessGroup>(new NcclProcessGroup(twin, comm));
}

NcclProcessGroup::NcclProcessGroup(std::shared_ptr<ProcessGroup> twin, ncclComm_t comm)
    : ProcessGroup(twin->rank(), twin->size(), twin->world_ranks()), twin_(std::move(twin)) {
  collectives_.comm = comm;
  int nccl_rank = -1;
  NCCL_CHECK(ncclCommUserRank(collectives_.comm, &nccl_rank));
  LLMP_CHECK(nccl_rank == rank(), "NCCL rank " + std::to_string(nccl_rank) +
                                      " differs from the MPI twin's rank " +
                                      std::to_string(rank()));
  CUDA_CHECK(cudaGetDevice(&cuda_device_));
  CUDA_CHECK(cudaStreamCreateWithFlags(&collectives_.stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  for (Lane& lane : p2p_) {  // collective over the group, as this constructor is
    NCCL_CHECK(ncclCommSplit(collectives_.comm, /*color=*/0, /*key=*/rank(), &lane.comm, nullptr));
    CUDA_CHECK(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking));
  }
}

NcclProcessGroup::~NcclProcessGroup() {
  // No CUDA_CHECK here: a destructor during an error's unwinding must not fail again.
  for (Lane* lane : {&p2p_[0], &p2p_[1], &collectives_}) {
    if (lane->stream) cudaStreamSynchronize(lane->stream);
    if (lane->comm) ncclCommDestroy(lane->comm);
    if (lane->stream) cudaStreamDestroy(lane->stream);
  }
  if (ready_) cudaEventDestroy(ready_);
}

void NcclProcessGroup::after_default_stream(const Lane& lane) {
  CUDA_CHECK(cudaSetDevice(cuda_device_));
  CUDA_CHECK(cudaEventRecord(ready_, /*legacy default stream=*/0));
  CUDA_CHECK(cudaStreamWaitEvent(lane.stream, ready_, 0));
}

std::shared_ptr<Work> NcclProcessGroup::recorded(const char* op, std::vector<Tensor> tensors,
                                                 int peer, bool peer_is_source, const Lane& lane) {
  cudaEvent_t done = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(done, lane.stream));
  WaitSite site;
  site.op = op;
  site.group = this;
  site.peer = peer;
  site.peer_is_source = peer_is_source;
  return std::make_shared<NcclWork>(done, lane.comm, std::move(tensors), site);
}

std::shared_ptr<ProcessGroup> NcclProcessGroup::make_split(int color, int key) {
  // Both split the same ranks the same way (by key, then by rank); the twin gives the layout.
  std::shared_ptr<ProcessGroup> sub_twin = twin_->split(color, key);
  ncclComm_t sub = nullptr;
  NCCL_CHECK(ncclCommSplit(collectives_.comm, color == kNoColor ? NCCL_SPLIT_NOCOLOR : color, key,
                           &sub, nullptr));
  if (!sub_twin) return nullptr;  // kNoColor: NCCL returned no communicator either
  LLMP_CHECK(sub != nullptr,
             "ncclCommSplit gave no communicator for color " + std::to_string(color));
  return std::shared_ptr<NcclProcessGroup>(new NcclProcessGroup(sub_twin, sub));
}

std::shared_ptr<ProcessGroup> NcclProcessGroup::make_duplicate() {
  return make_split(/*color=*/0, /*key=*/rank());  // same ranks, same order, a new communicator
}

void NcclProcessGroup::local_copy(const Tensor& src, Tensor& dst) {
  if (src.nbytes() == 0 || src.raw() == dst.raw()) return;
  if (on_host(src, dst)) return ProcessGroup::local_copy(src, dst);
  after_default_stream();
  CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(src.nbytes()),
                             cudaMemcpyDefault, collectives_.stream));
  CUDA_CHECK(cudaStreamSynchronize(
      collectives_.stream));  // the one-rank "collective" is complete on return
}

namespace {
// --backend nccl (backend.h): train_main makes its world with this when the library is linked.
std::shared_ptr<ProcessGroup> make_nccl(ProcessGroup& host_group) {
  return NcclProcessGroup::create(host_group);
}
[[maybe_unused]] const bool registered = (register_nccl_backend(&make_nccl), true);
}  // namespace

}  // namespace llmp
