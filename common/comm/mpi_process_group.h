// MpiProcessGroup: the MPI backend of ProcessGroup (process_group.h), and the default one:
// ProcessGroup::world() is an MpiProcessGroup over the job's world communicator.
//
// Host tensors (Device::kCPU) over one MPI communicator per group. Device tensors
// (Device::kCUDA) are accepted too and staged through host buffers (process_group_staging.h):
// copied down before the MPI call, copied up when the Work completes; CommStats count the
// collective as for host tensors, staging_stats() the copies. Every operation is issued in
// its non-blocking form (MPI_Iallreduce, MPI_Isend, ...) and returned as an MpiWork; the blocking
// forms of ProcessGroup wait on it with mpi_wait(), which yields the core while polling when
// ranks oversubscribe it (mpi_util.h). kAvg is a sum on the wire, divided by N on completion.
// f16 and bf16 are reduced by user-defined MPI ops that add each pair in f32 and round it back
// (mpi_float16.h), so 16-bit gradients travel as 2 bytes per element.
// split() is MPI_Comm_split (kNoColor -> MPI_UNDEFINED), duplicate() is MPI_Comm_dup.
//
// Files: process_group_mpi.cc (construction, world(), split, duplicate, the even collectives),
// process_group_async.cc (MpiWork, the v-collectives, send and recv), mpi_util.h (MPI_CHECK,
// counts, datatypes, the yielding wait), mpi_float16.h (the 16-bit sum and max ops). Nothing
// outside these files and common/runtime calls MPI: stages and shared code see only ProcessGroup.
//
// Glossary: N ranks in the group, r this rank; comm = the group's MPI communicator.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "common/comm/mpi_util.h"
#include "common/comm/process_group.h"

namespace llmp {

class MpiProcessGroup final : public ProcessGroup {
 public:
  /// A group over `comm` (not MPI_COMM_NULL), which it frees on destruction when `owns` is true
  /// (unless MPI is finalised by then). Sets MPI_ERRORS_RETURN on it so that MPI_CHECK names
  /// the failing call. Local, not collective.
  MpiProcessGroup(MPI_Comm comm, bool owns);
  ~MpiProcessGroup() override;

  Device device() const override { return Device::kCPU; }
  /// Host tensors, and device tensors through host staging buffers.
  bool accepts(Device d) const override { return d == Device::kCPU || d == Device::kCUDA; }
  StagingStats staging_stats() const override { return staging_->stats(); }
  /// The communicator, for the backend's own files and tests.
  MPI_Comm comm() const { return comm_; }

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

 private:
  struct Layout {
    int rank = 0, size = 1;
    std::vector<int> world_ranks;
  };
  /// Sets the error handler on `comm` and reads its rank, size and world ranks.
  static Layout layout_of(MPI_Comm comm);
  MpiProcessGroup(MPI_Comm comm, bool owns, Layout layout);

  /// A new debt on this group's staging pool, and the host stand-in of `t` recorded in it
  /// (t itself on the host); `down`: copy t's bytes down now; `up`: copy the stand-in back
  /// into t when the Work completes.
  StagingDebt debt() const { return StagingDebt{staging_, {}, {}}; }
  Tensor stage(StagingDebt* d, const Tensor& t, bool down, bool up);

  MPI_Comm comm_;
  bool owns_;
  std::shared_ptr<StagingPool> staging_ = std::make_shared<StagingPool>();
};

}  // namespace llmp
