// ProcessGroup: the collectives every stage is built from, over an explicit group of ranks.
//
// Backend: MPI on host tensors (this file's implementation, process_group_mpi.cc). A NCCL backend
// for device tensors comes with the GPU stages. Semantics follow NCCL / torch.distributed:
//
//   all_reduce      every rank ends with op(x_0, ..., x_{N-1})                 sends 2(N-1)/N·S
//   reduce_scatter  input N·S' elements, rank r ends with op(...) of chunk r   sends (N-1)/N·S
//   all_gather      input S' elements, every rank ends with all N chunks        sends (N-1)/N·S
//   broadcast       every rank ends with root's tensor                          sends S
//   reduce          root ends with op(x_0, ..., x_{N-1})                        sends S
//   all_to_all      chunk j of rank i goes to chunk i of rank j                 sends (N-1)/N·S
//   send / recv     point to point                                              send counts S
// S is the size in bytes of the full tensor (the all_reduce operand, the reduce_scatter input, the
// all_gather output); the factors are the ring-algorithm volumes that nccl-tests uses for bus
// bandwidth. The group counts these bytes per rank (CommStats), which is what the stages assert
// against the closed forms of the ZeRO paper. A collective on a group of one rank is a no-op that
// counts zero bytes.
//
// Glossary: N = size() ranks in the group, r = rank() in the group, S = bytes.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"

namespace llmp {

enum class ReduceOp { kSum, kAvg, kMax };

/// Bytes this rank sent, per operation name ("all_reduce", "reduce_scatter", "all_gather",
/// "broadcast", "reduce", "all_to_all", "send"), by the formulas above, and call counts.
struct CommStats {
  std::map<std::string, double> bytes;
  std::map<std::string, int64_t> calls;
  double total_bytes() const;
};

/// A pending non-blocking operation (MPI_Request underneath). wait() is idempotent. Destroying
/// a Work that has not completed waits for it (MPI cannot cancel a non-blocking collective).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  /// Non-blocking completion test (drives MPI progress).
  virtual bool test() = 0;
};

class ProcessGroup {
 public:
  /// All ranks of MPI_COMM_WORLD. MPI must be initialised (common/runtime/launch.h).
  /// Local, not collective: wraps MPI_COMM_WORLD without duplicating it; each call returns a new
  /// group with its own CommStats.
  static std::shared_ptr<ProcessGroup> world();
  /// A group over `comm`, which it owns (freed on destruction) when `owns` is true.
  ProcessGroup(MPI_Comm comm, bool owns);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }
  /// Ranks of MPI_COMM_WORLD in this group, in group-rank order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  // --- collectives (blocking). Tensors are host f32 unless stated; f16/bf16 are accepted by
  // broadcast, all_gather, all_to_all, send and recv (bytes are moved, nothing is added). ---

  /// In place. kAvg divides the sum by N.
  void all_reduce(Tensor& t, ReduceOp op = ReduceOp::kSum);
  /// input: N·k elements, output: k elements (chunk r of the reduced input).
  void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op = ReduceOp::kSum);
  /// Uneven variant: rank i receives counts[i] consecutive elements of the reduced input
  /// (sum(counts) == input.numel(), counts may be 0). Bytes counted as (N-1)/N·S, S = input bytes.
  void reduce_scatter_v(const Tensor& input, Tensor& output, const std::vector<int64_t>& counts,
                        ReduceOp op = ReduceOp::kSum);
  /// input: k elements, output: N·k elements, chunk i from rank i. The input may be chunk r of
  /// the output itself (output.narrow(r·k, k), ZeRO's shard of a flat buffer): gathered in place.
  void all_gather(const Tensor& input, Tensor& output);
  /// Uneven variant: rank i contributes counts[i] elements; output holds them in rank order. The
  /// input may be this rank's slice of the output (gathered in place).
  void all_gather_v(const Tensor& input, Tensor& output, const std::vector<int64_t>& counts);
  /// In place; `root` is a rank of this group.
  void broadcast(Tensor& t, int root);
  /// In place on root (other ranks' tensors are left unchanged).
  void reduce(Tensor& t, int root, ReduceOp op = ReduceOp::kSum);
  /// input and output: N·k elements each; chunk j of input goes to rank j, chunk i of output
  /// comes from rank i.
  void all_to_all(const Tensor& input, Tensor& output);
  /// Counts S under "send" (0 in a group of one rank).
  void send(const Tensor& t, int dst, int tag = 0);
  /// Counts a call under "recv" with 0 bytes. Ends every rank, naming both counts, when the
  /// message received is shorter than t.
  void recv(Tensor& t, int src, int tag = 0);
  void barrier();

  // --- non-blocking: the operation may run while the caller computes (DDP's bucket overlap,
  // pipeline send/recv). The tensors must stay alive and untouched until wait(). ---
  std::shared_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::kSum);
  std::shared_ptr<Work> reduce_scatter_v_async(const Tensor& input, Tensor& output,
                                               const std::vector<int64_t>& counts,
                                               ReduceOp op = ReduceOp::kSum);
  std::shared_ptr<Work> all_gather_v_async(const Tensor& input, Tensor& output,
                                           const std::vector<int64_t>& counts);
  std::shared_ptr<Work> isend(const Tensor& t, int dst, int tag = 0);
  std::shared_ptr<Work> irecv(Tensor& t, int src, int tag = 0);

  /// Sub-group of the ranks passing the same `color`, ordered by `key` (MPI_Comm_split).
  /// Collective over this group. A rank passing color MPI_UNDEFINED gets nullptr.
  std::shared_ptr<ProcessGroup> split(int color, int key);

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats(); }

 private:
  void count(const char* op, double bytes);
  MPI_Comm comm_;
  bool owns_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
  CommStats stats_;
};

/// Sum of stats over a set of groups (a rank usually sits in several: dp, pp, tp).
CommStats merge_stats(const std::vector<const ProcessGroup*>& groups);

}  // namespace llmp

/// Wraps an MPI call: on failure prints file:line, the call and MPI's error string, ends all ranks.
#define MPI_CHECK(call)                                                              \
  do {                                                                               \
    int mpi_check_rc_ = (call);                                                      \
    if (mpi_check_rc_ != MPI_SUCCESS) ::llmp::mpi_fail(__FILE__, __LINE__, #call, mpi_check_rc_); \
  } while (0)

namespace llmp {
[[noreturn]] void mpi_fail(const char* file, int line, const char* call, int rc);
}
