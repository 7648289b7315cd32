// NcclProcessGroup (nccl_process_group.h), part 2: the hooks. Each waits for the default
// stream's queued work, issues NCCL on the group's stream and returns a Work over an event
// recorded after it. The base class has checked the arguments, counted the bytes (the same ring
// volumes as for MPI) and handled the one-rank group. Compiled here, never run (no GPU).
//
// Glossary: N = size(), r = rank(), k elements per chunk, es bytes per element.
#include <string>

#include "common/comm/nccl_process_group.h"
#include "kernels/cuda/cuda_check.h"

namespace llmp {

namespace {
// The element at `offset` (in elements) of t's bytes, for the chunked forms.
void* at(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.raw()) + offset * dtype_size(t.dtype());
}
}  // namespace

bool NcclProcessGroup::on_host(const Tensor& a, const Tensor& b) const {
  return a.device() == Device::kCPU || b.device() == Device::kCPU;
}

Tensor NcclProcessGroup::reduced_on_device(const Tensor& output) {
  return Tensor::empty(output.shape(), output.dtype(), MemCategory::kCommBuffers, Device::kCUDA);
}

// After the reduction on the same stream; the Work's event, recorded after it, completes once the
// share is on the host. Into pageable host memory the copy may return only once it is done
// (CUDA's "API synchronization behavior"): the host then waits for the reduction here, as in
// the twin's blocking reduce-scatter.
void NcclProcessGroup::copy_down(const Tensor& reduced, Tensor& output) {
  if (output.nbytes() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(output.raw(), reduced.raw(), static_cast<size_t>(output.nbytes()),
                             cudaMemcpyDeviceToHost, collectives_.stream));
}

std::shared_ptr<Work> NcclProcessGroup::start_all_reduce(Tensor& t, ReduceOp op) {
  if (on_host(t)) return twin_->all_reduce_async(t, op);
  after_default_stream();
  NCCL_CHECK(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()),
                           nccl_datatype(t.dtype()), nccl_op(op), collectives_.comm,
                           collectives_.stream));
  return recorded("all_reduce", {t});
}

std::shared_ptr<Work> NcclProcessGroup::start_reduce_scatter(const Tensor& input, Tensor& output,
                                                             ReduceOp op) {
  const bool down = goes_down(input, output);
  if (on_host(input, output) && !down) {
    twin_->reduce_scatter(input, output, op);
    return completed_work();
  }
  const Tensor into = down ? reduced_on_device(output) : output;
  after_default_stream();
  NCCL_CHECK(ncclReduceScatter(input.raw(), into.raw(), static_cast<size_t>(output.numel()),
                               nccl_datatype(input.dtype()), nccl_op(op), collectives_.comm,
                               collectives_.stream));
  if (down) copy_down(into, output);
  return recorded("reduce_scatter", {input, output, into});
}

// No uneven reduce-scatter in NCCL: rank i's chunk is an ncclReduce to root i, all N in one
// group so NCCL runs them together.
std::shared_ptr<Work> NcclProcessGroup::start_reduce_scatter_v(const Tensor& input, Tensor& output,
                                                               const std::vector<int64_t>& counts,
                                                               ReduceOp op) {
  const bool down = goes_down(input, output);
  if (on_host(input, output) && !down)
    return twin_->reduce_scatter_v_async(input, output, counts, op);
  const Tensor into = down ? reduced_on_device(output) : output;
  after_default_stream();
  const ncclDataType_t dt = nccl_datatype(input.dtype());
  int64_t displ = 0;
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < size(); ++i) {
    if (counts[i] > 0)  // recvbuff is used on the root only
      NCCL_CHECK(ncclReduce(at(input, displ), i == rank() ? into.raw() : nullptr,
                            static_cast<size_t>(counts[i]), dt, nccl_op(op), i, collectives_.comm,
                            collectives_.stream));
    displ += counts[i];
  }
  NCCL_CHECK(ncclGroupEnd());
  if (down) copy_down(into, output);
  return recorded("reduce_scatter_v", {input, output, into});
}

// In place needs nothing special: NCCL's in-place all_gather is sendbuff == recvbuff + r·k·es,
// which is what in_place means here.
std::shared_ptr<Work> NcclProcessGroup::start_all_gather(const Tensor& input, Tensor& output,
                                                         bool /*in_place*/) {
  if (on_host(input, output)) {
    twin_->all_gather(input, output);
    return completed_work();
  }
  after_default_stream();
  NCCL_CHECK(ncclAllGather(input.raw(), output.raw(), static_cast<size_t>(input.numel()),
                           nccl_datatype(input.dtype()), collectives_.comm, collectives_.stream));
  return recorded("all_gather", {input, output});
}

// Uneven all_gather: this rank's slice to every peer and every peer's slice from it, in one
// group; its own slice by a device copy unless it is already there (in place).
std::shared_ptr<Work> NcclProcessGroup::start_all_gather_v(const Tensor& input, Tensor& output,
                                                           const std::vector<int64_t>& counts,
                                                           bool in_place) {
  if (on_host(input, output)) return twin_->all_gather_v_async(input, output, counts);
  after_default_stream();
  const ncclDataType_t dt = nccl_datatype(input.dtype());
  const int r = rank();
  int64_t displ = 0, mine = 0;
  NCCL_CHECK(ncclGroupStart());
  for (int j = 0; j < size(); ++j) {
    if (j == r) mine = displ;
    if (j != r && counts[r] > 0)
      NCCL_CHECK(ncclSend(input.raw(), static_cast<size_t>(counts[r]), dt, j, collectives_.comm,
                          collectives_.stream));
    if (j != r && counts[j] > 0)
      NCCL_CHECK(ncclRecv(at(output, displ), static_cast<size_t>(counts[j]), dt, j,
                          collectives_.comm, collectives_.stream));
    displ += counts[j];
  }
  NCCL_CHECK(ncclGroupEnd());
  if (!in_place && counts[r] > 0)
    CUDA_CHECK(cudaMemcpyAsync(at(output, mine), input.raw(), static_cast<size_t>(input.nbytes()),
                               cudaMemcpyDeviceToDevice, collectives_.stream));
  return recorded("all_gather_v", {input, output});
}

std::shared_ptr<Work> NcclProcessGroup::start_broadcast(Tensor& t, int root) {
  if (on_host(t)) {
    twin_->broadcast(t, root);
    return completed_work();
  }
  after_default_stream();
  NCCL_CHECK(ncclBroadcast(t.raw(), t.raw(), static_cast<size_t>(t.numel()),
                           nccl_datatype(t.dtype()), root, collectives_.comm, collectives_.stream));
  return recorded("broadcast", {t});
}

std::shared_ptr<Work> NcclProcessGroup::start_reduce(Tensor& t, int root, ReduceOp op) {
  if (on_host(t)) {
    twin_->reduce(t, root, op);
    return completed_work();
  }
  after_default_stream();
  // In place on the root; the other ranks' t is only read (recvbuff is used on the root only).
  NCCL_CHECK(ncclReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_datatype(t.dtype()),
                        nccl_op(op), root, collectives_.comm, collectives_.stream));
  return recorded("reduce", {t});
}

// Chunk j of the input to rank j, chunk i of the output from rank i (self included: NCCL copies
// a send to oneself), in one group.
std::shared_ptr<Work> NcclProcessGroup::start_all_to_all(const Tensor& input, Tensor& output) {
  if (on_host(input, output)) {
    twin_->all_to_all(input, output);
    return completed_work();
  }
  after_default_stream();
  const ncclDataType_t dt = nccl_datatype(input.dtype());
  const int64_t k = input.numel() / size();
  NCCL_CHECK(ncclGroupStart());
  for (int j = 0; j < size(); ++j) {
    NCCL_CHECK(ncclSend(at(input, j * k), static_cast<size_t>(k), dt, j, collectives_.comm,
                        collectives_.stream));
    NCCL_CHECK(ncclRecv(at(output, j * k), static_cast<size_t>(k), dt, j, collectives_.comm,
                        collectives_.stream));
  }
  NCCL_CHECK(ncclGroupEnd());
  return recorded("all_to_all", {input, output});
}

// NCCL has no tags (a host tensor's message keeps its tag, over the twin): messages between two
// ranks match in the order they are issued, and a send
// and a receive issued separately on one stream can wait on each other (both ranks sending
// first deadlocks). Callers order their point-to-point pairs as the blocking ring test does.
std::shared_ptr<Work> NcclProcessGroup::start_send(const Tensor& t, int dst, int tag) {
  if (on_host(t)) return twin_->isend(t, dst, tag);
  const Lane& lane = p2p_lane(rank(), dst);
  after_default_stream(lane);
  NCCL_CHECK(ncclSend(t.raw(), static_cast<size_t>(t.numel()), nccl_datatype(t.dtype()), dst,
                      lane.comm, lane.stream));
  return recorded("send", {t}, dst, /*peer_is_source=*/false, lane);
}

std::shared_ptr<Work> NcclProcessGroup::start_recv(Tensor& t, int src, int tag) {
  if (on_host(t)) return twin_->irecv(t, src, tag);
  const Lane& lane = p2p_lane(src, rank());
  after_default_stream(lane);
  NCCL_CHECK(ncclRecv(t.raw(), static_cast<size_t>(t.numel()), nccl_datatype(t.dtype()), src,
                      lane.comm, lane.stream));
  return recorded("recv", {t}, src, /*peer_is_source=*/true, lane);
}

std::shared_ptr<Work> NcclProcessGroup::start_barrier() {
  if (!barrier_word_.defined())
    barrier_word_ = Tensor::zeros({1}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  after_default_stream();
  NCCL_CHECK(ncclAllReduce(barrier_word_.raw(), barrier_word_.raw(), 1, ncclFloat32, ncclSum,
                           collectives_.comm, collectives_.stream));
  return recorded("barrier", {barrier_word_});
}

}  // namespace llmp
