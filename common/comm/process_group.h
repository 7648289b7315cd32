// ProcessGroup: the collectives every stage is built from, over an explicit group of ranks.
// This file is the interface only: no backend, no MPI or NCCL type.
//
// Semantics follow NCCL / torch.distributed, with the per-rank traffic each operation causes:
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
// Backends. The public methods are not virtual: this class checks the arguments, counts the
// bytes and handles the one-rank group, for every backend alike; then it calls a protected hook
// (start_all_reduce, ...) that a backend implements. Backends (leveldb's Env with env_posix.cc
// behind it is the model):
//   MpiProcessGroup  (mpi_process_group.h)  host tensors over an MPI communicator; world() is its
//                                           world, so it is the default backend.
//                                           It also takes Device::kCUDA tensors, staged through
//                                           host buffers (process_group_staging.h).
//   NcclProcessGroup (nccl_process_group.h) device tensors over a NCCL communicator, with the
//                    same counting, checks and semantics; returns Device::kCUDA from device(),
//                    implements the hooks on its CUDA stream and overrides local_copy(). Code
//                    that takes a ProcessGroup& runs on either unchanged. Compiled, never run
//                    here (README.md, "Device tensors and NCCL").
// Code that only passes groups around depends on //common/comm:process_group (this interface);
// code that needs a world to start from depends on //common/comm (interface + MPI backend).
//
// Bookkeeping (metrics, the report table, span gathering) runs on a duplicate() of the group, so
// the technique's CommStats show only the technique's bytes.
//
// The watchdog. A rank that waits in a collective, a send or a receive longer than
// comm_timeout() seconds ends the whole job with one line naming itself, the operation and the
// peer or group it waited for, and exit status 124 (as timeout(1)):
//   error: rank 0: timed out after 5 s in recv_backward from rank 1 (pipeline group); a rank
//   stopped or hung
// A stopped or crashed peer then ends the run instead of hanging it. The backend checks the
// deadline in its wait loop (the MPI one: MPI_Test + sched_yield, mpi_util.h). Off (0) until
// set_comm_timeout(); the trainers set it from --timeout (default 600 s, common/runtime/flags.h).
//
// Glossary: N = size() ranks in the group, r = rank() in the group, S = bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"

namespace llmp {

enum class ReduceOp { kSum, kAvg, kMax };

/// Bytes this rank sent, per operation name ("all_reduce", "reduce_scatter", "all_gather",
/// "broadcast", "reduce", "all_to_all", "send"), by the formulas above, and call counts (also
/// "recv" and "barrier", which count 0 bytes).
struct CommStats {
  std::map<std::string, double> bytes;
  std::map<std::string, int64_t> calls;
  double total_bytes() const;
  /// bytes[op], or 0 when `op` was never called (what the tests assert against closed forms).
  double bytes_of(const std::string& op) const;
  /// calls[op], or 0 when `op` was never called.
  int64_t calls_of(const std::string& op) const;
  /// Every operation called, in name order, for a message: " all_gather ×1 reduce_scatter ×2",
  /// or " (none)".
  std::string calls_str() const;
};

/// Host staging of device tensors by a backend that moves host memory (the MPI backend,
/// process_group_staging.h): bytes copied device -> host before an operation (to_host) and
/// host -> device after it (to_device), and the staging buffers held. Kept apart from CommStats on
/// purpose: CommStats (and total_bytes()) count the collective on the wire, identical for host
/// and device tensors; these count the PCIe copies the staging adds. Cumulative per group
/// (reset_stats() leaves them). All zero for host tensors and for a device backend (NCCL).
struct StagingStats {
  int64_t to_host_bytes = 0;    ///< device -> host copies, bytes
  int64_t to_device_bytes = 0;  ///< host -> device copies, bytes
  int64_t buffer_bytes = 0;     ///< staging buffers held now, bytes (grow-only, reused)
  int64_t buffers = 0;          ///< staging buffers held now
};

/// A pending non-blocking operation (the backend's request: an MPI request, a CUDA event after a
/// NCCL call). wait() is idempotent. Destroying a Work that has not completed waits for it (MPI
/// cannot cancel a non-blocking collective).
class Work {
 public:
  virtual ~Work() = default;
  /// Blocks until the operation completes; past comm_timeout() ends the job (the watchdog).
  virtual void wait() = 0;
  /// Non-blocking completion test (drives the backend's progress).
  virtual bool test() = 0;
  /// What the caller calls this operation ("recv_forward"), for the watchdog's message; the
  /// group's operation name ("recv") when unset. `op` must outlive the Work (a string literal).
  void set_label(const char* op) { label_ = op; }

 protected:
  const char* label_ = nullptr;
};

/// A Work that is already complete: a one-rank group's operations, and a backend's operation that
/// ran to its end before returning (the NCCL backend's host tensors over its blocking twin).
std::shared_ptr<Work> completed_work();

/// The watchdog's limit for every wait of every group, in seconds; 0 turns it off (the default).
/// Process-wide: one process is one rank. Ends the process (fail_at) on a negative or NaN value.
void set_comm_timeout(double seconds);
/// The limit set by set_comm_timeout (0: off).
double comm_timeout();

class ProcessGroup {
 public:
  /// The color for split() of a rank that joins no sub-group (it gets nullptr).
  static constexpr int kNoColor = -1;

  /// The default backend's world: MPI over host tensors, all ranks of the job (defined in
  /// process_group_mpi.cc, as leveldb's Env::Default() is in env_posix.cc). MPI must be
  /// initialised (common/runtime/launch.h). Local, not collective: it wraps the job's world
  /// communicator without duplicating it; each call returns a new group with its own CommStats.
  static std::shared_ptr<ProcessGroup> world();

  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// What the watchdog's message calls this group: "world" for world(), "group" for a new one
  /// unless named ("data-parallel group", "pipeline group", ... by ProcessGrid); a duplicate()
  /// keeps its original's name.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  /// Ranks of the job's world (world()) in this group, in group-rank order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  /// Where this backend's tensors live: Device::kCPU for MPI, Device::kCUDA for NCCL. Every
  /// operation ends every rank, naming the tensor, when given a tensor on a device the backend
  /// does not accept (accepts()).
  virtual Device device() const = 0;
  /// Whether operations take tensors on `d`: device() always; a backend that stages may take
  /// more (the MPI backend takes Device::kCUDA tensors through host buffers,
  /// process_group_staging.h). Each tensor of an operation is checked on its own.
  virtual bool accepts(Device d) const { return d == device(); }
  /// The staging copies this group made (all zero unless it staged device tensors).
  virtual StagingStats staging_stats() const { return {}; }

  // --- collectives (blocking). Operations that add or compare elements (all_reduce,
  // reduce_scatter, reduce_scatter_v, reduce and their async forms) take f32, f64, f16 and bf16;
  // the others move bytes and also take u8. A wrong dtype, size or root ends every rank with the
  // operation's name and the tensors' descriptions (file:line, common/runtime/check.h).
  //
  // 16-bit reductions (f16, bf16) travel as 2 bytes per element (the byte counts use 2-byte
  // elements) and round at every pairwise addition: each pair is widened to f32, added and
  // rounded back to nearest even, as NCCL's 16-bit all_reduce does. A reduction over N ranks
  // therefore rounds N - 1 times, in the order the backend's algorithm picks (MPICH's, by
  // message size and N), and is not bit-identical to rounding the f32 sum once (rank values
  // 1, 1/8 + u/2, u/64 with u = ulp(1): 1.125 per pair, 1.125 + u rounded once). Every rank of
  // an all_reduce gets the same bits. f16 overflow gives inf (65504 + 65504), not an error: a
  // loss scaler looks for it. kMax returns one of the inputs, bit for bit (NaN if any is NaN);
  // kAvg widens the sum, multiplies by 1/N and rounds. ---

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
  // pipeline send/recv). The tensors must stay alive and untouched until wait(). Same checks
  // and byte counts as the blocking forms, counted at issue. ---
  std::shared_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::kSum);
  std::shared_ptr<Work> reduce_scatter_v_async(const Tensor& input, Tensor& output,
                                               const std::vector<int64_t>& counts,
                                               ReduceOp op = ReduceOp::kSum);
  std::shared_ptr<Work> all_gather_v_async(const Tensor& input, Tensor& output,
                                           const std::vector<int64_t>& counts);
  std::shared_ptr<Work> isend(const Tensor& t, int dst, int tag = 0);
  std::shared_ptr<Work> irecv(Tensor& t, int src, int tag = 0);

  // --- new groups (collective over this group; a new group starts with empty CommStats) ---

  /// Sub-group of the ranks passing the same `color` (≥ 0), ordered by `key` then by rank. A
  /// rank passing kNoColor joins none and gets nullptr. Ends every rank on a color < 0 other
  /// than kNoColor.
  std::shared_ptr<ProcessGroup> split(int color, int key);
  /// The same ranks in the same order, with CommStats of its own and a communicator of its own:
  /// its messages never match this group's (a recv here never receives a send made there) and
  /// its bytes are never counted here. What bookkeeping uses (MetricsReducer, print_report,
  /// gather_spans), so that the technique's CommStats show only the technique's bytes.
  std::shared_ptr<ProcessGroup> duplicate();

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats(); }

 protected:
  /// For backends: this rank's place in the group, and the world rank of each group rank.
  ProcessGroup(int rank, int size, std::vector<int> world_ranks);

  // --- backend hooks. Called only after the checks above passed, with N > 1 (send and recv
  // also with N = 1: a rank may message itself), so a hook only moves data. Each starts the
  // operation and returns its Work; the blocking forms wait on it at once. kAvg is the backend's
  // to apply (a sum on the wire, divided by N on completion, or NCCL's ncclAvg). ---
  virtual std::shared_ptr<Work> start_all_reduce(Tensor& t, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> start_reduce_scatter(const Tensor& input, Tensor& output,
                                                     ReduceOp op) = 0;
  virtual std::shared_ptr<Work> start_reduce_scatter_v(const Tensor& input, Tensor& output,
                                                       const std::vector<int64_t>& counts,
                                                       ReduceOp op) = 0;
  /// in_place: input is chunk r of output (else they do not overlap).
  virtual std::shared_ptr<Work> start_all_gather(const Tensor& input, Tensor& output,
                                                 bool in_place) = 0;
  /// in_place: input is this rank's slice of output (else they do not overlap).
  virtual std::shared_ptr<Work> start_all_gather_v(const Tensor& input, Tensor& output,
                                                   const std::vector<int64_t>& counts,
                                                   bool in_place) = 0;
  virtual std::shared_ptr<Work> start_broadcast(Tensor& t, int root) = 0;
  virtual std::shared_ptr<Work> start_reduce(Tensor& t, int root, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> start_all_to_all(const Tensor& input, Tensor& output) = 0;
  virtual std::shared_ptr<Work> start_send(const Tensor& t, int dst, int tag) = 0;
  /// Must end every rank, naming both counts, when the message is shorter than t.
  virtual std::shared_ptr<Work> start_recv(Tensor& t, int src, int tag) = 0;
  virtual std::shared_ptr<Work> start_barrier() = 0;
  /// color ≥ 0, or kNoColor (then return nullptr).
  virtual std::shared_ptr<ProcessGroup> make_split(int color, int key) = 0;
  virtual std::shared_ptr<ProcessGroup> make_duplicate() = 0;
  /// The one-rank group's "collective": copy src to dst (same numel and dtype) unless they are
  /// the same bytes. Default: Tensor::copy_from (a host memmove, or the device allocator's copy
  /// when either tensor is on a device); a device backend may override it (on its stream).
  virtual void local_copy(const Tensor& src, Tensor& dst);

 private:
  void count(const char* op, double bytes);
  void check_tensor(const Tensor& t, const char* op, bool reduces) const;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
  std::string name_ = "group";
  CommStats stats_;
};

/// Sum of stats over a set of groups (a rank usually sits in several: dp, pp, tp).
CommStats merge_stats(const std::vector<const ProcessGroup*>& groups);

}  // namespace llmp
