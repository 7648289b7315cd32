// Host staging of device tensors for a backend that moves host memory (the MPI backend).
//
// Why: NCCL refuses two ranks on one GPU, so when ranks share a GPU (or NCCL is absent) the
// collectives of device tensors still have to run, over MPI. MPI reads and writes host memory
// (MPICH here is not CUDA-aware), so each device tensor of an operation is copied into a host
// staging buffer, MPI runs on the buffer, and what the operation writes is copied back when it
// completes (the Work's wait(), or a test() that finds it done) — the "host staging" path of
// torch.distributed's gloo backend for CUDA tensors (ProcessGroupGloo's CUDA work classes).
//
// What each operation copies (S = bytes of the tensor named; "down" = device -> host before the
// operation, "up" = host -> device after it; only what the operation reads goes down and only
// what it writes comes up):
//   all_reduce(t)               t down, t up                     (S down, S up)
//   reduce_scatter(_v)(in,out)  in down, out up
//   all_gather(_v)(in,out)      in down, out up; in place: in down into chunk r of the staged
//                               output, the whole output up
//   broadcast(t, root)          root: t down, nothing up; others: nothing down, t up
//   reduce(t, root)             every rank t down; the root t up (others' t is unchanged)
//   all_to_all(in,out)          in down, out up
//   send(t) / recv(t)           send: t down only; recv: t up only
// The CommStats of the operation are the collective's and stay what they are for host tensors;
// these copies are counted apart, in StagingStats (process_group.h), never in total_bytes().
//
// Buffers: one pool per group, grow-only and reused across calls. An operation takes a free
// buffer of its dtype holding at least its bytes (the smallest that fits; a free one too small
// is replaced by a larger one; none free: a new one), and gives it back when its Work completes,
// so async operations in flight (DDP's buckets) each hold their own. Buffers are pinned host
// memory when a CUDA target registered a pinned allocator (register_pinned_host_allocator:
// cudaMallocHost/cudaFreeHost, pinned_host_allocator.cc), plain host memory otherwise; either
// way they are counted in the MemoryTracker under MemCategory::kOther (not kCommBuffers, which
// the stages assert against their techniques' closed forms).
//
// Glossary: S bytes, r this rank's place in the group, "device" = Device::kCUDA (a real GPU or
// the tests' FakeDevice, common/testing/fake_device.h).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// Makes `a` the allocator of staging buffers (pinned host memory); nullptr: plain host memory
/// (the default). Called by a CUDA target when linked (pinned_host_allocator.cc); the allocator
/// must outlive every group.
void register_pinned_host_allocator(Allocator* a);
/// The registered pinned allocator, or nullptr.
Allocator* pinned_host_allocator();

/// One group's staging buffers and copy counts. Single-threaded, like the group that owns it.
class StagingPool {
 public:
  /// What keeps a staging buffer busy: held by the operation's Work until it completes.
  using Lease = std::shared_ptr<void>;

  /// The host tensor an MPI call uses in place of `t`: `t` itself when it is a host tensor;
  /// else a view of t.numel() elements of dtype t.dtype() over a free staging buffer, holding
  /// t's bytes when `down` (copied device -> host now, counted in to_host_bytes). Appends the
  /// buffer's lease to `leases`.
  Tensor stage(const Tensor& t, bool down, std::vector<Lease>* leases);
  /// Copies `host` (t's staging view) into `device` (t) and counts it in to_device_bytes; no-op
  /// when they are the same tensor (a host tensor staged as itself).
  void copy_up(const Tensor& host, Tensor& device);
  /// Copies `device` into `host` (a staging view, or a part of one: the in-place all_gather's
  /// chunk) and counts it in to_host_bytes.
  void copy_down(const Tensor& device, Tensor& host);

  const StagingStats& stats() const { return stats_; }

 private:
  struct Buffer {
    Tensor data;  ///< host, 1-D, its dtype; capacity data.nbytes()
  };
  /// A free buffer of `dtype` with room for `numel` elements (grows or adds one).
  std::shared_ptr<Buffer> acquire(DType dtype, int64_t numel);
  static Tensor allocate(DType dtype, int64_t numel);

  std::vector<std::shared_ptr<Buffer>> buffers_;  ///< free when use_count() == 1 (only here)
  StagingStats stats_;
};

/// What an operation on staged tensors owes when it completes: the copies up (staging view,
/// device tensor) and the leases of its buffers, released after the copies.
struct StagingDebt {
  std::shared_ptr<StagingPool> pool;
  std::vector<std::pair<Tensor, Tensor>> up;  ///< (host staging view, device tensor)
  std::vector<StagingPool::Lease> leases;
  /// Copies every view up and releases the buffers. Idempotent.
  void settle();
};

}  // namespace llmp
