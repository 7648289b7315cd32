// ProcessGroup over MPI, blocking operations: construction, split, byte accounting, and the
// collectives (all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send, recv,
// barrier). The non-blocking forms and Work live in process_group_async.cc.
//
// Each collective is issued in its non-blocking form (MPI_Iallreduce, ...) and completed with
// mpi_wait(), which yields the core while polling when ranks oversubscribe it (mpi_util.h).
// Bytes are counted per rank by the ring factors of process_group.h, before the call:
//   all_reduce 2(N-1)/N·S   reduce_scatter, all_gather, all_to_all (N-1)/N·S
//   broadcast, reduce S     send S (recv 0)      on a group of one rank: 0, and nothing is sent.
//
// Glossary: N = size_, r = rank_, S = bytes of the full tensor, k = elements per rank's chunk.
#include <cstring>

#include "common/comm/mpi_util.h"
#include "common/comm/process_group.h"
#include "common/runtime/check.h"

namespace llmp {

namespace {
std::string str(int64_t v) { return std::to_string(v); }

// Copies src into dst unless they are the same bytes (a one-rank group's "collective").
void local_copy(const Tensor& src, Tensor& dst) {
  if (src.nbytes() > 0 && src.raw() != dst.raw()) std::memmove(dst.raw(), src.raw(), src.nbytes());
}
}  // namespace

double CommStats::total_bytes() const {
  double total = 0;
  for (const auto& kv : bytes) total += kv.second;
  return total;
}

CommStats merge_stats(const std::vector<const ProcessGroup*>& groups) {
  CommStats out;
  for (const ProcessGroup* g : groups) {
    for (const auto& kv : g->stats().bytes) out.bytes[kv.first] += kv.second;
    for (const auto& kv : g->stats().calls) out.calls[kv.first] += kv.second;
  }
  return out;
}

std::shared_ptr<ProcessGroup> ProcessGroup::world() {
  int init = 0;
  MPI_Initialized(&init);
  LLMP_CHECK(init, "MPI is not initialised: call launch_or_init() (common/runtime/launch.h) first");
  return std::make_shared<ProcessGroup>(MPI_COMM_WORLD, /*owns=*/false);
}

ProcessGroup::ProcessGroup(MPI_Comm comm, bool owns) : comm_(comm), owns_(owns) {
  LLMP_CHECK(comm != MPI_COMM_NULL, "ProcessGroup over MPI_COMM_NULL");
  // Errors come back as return codes so MPI_CHECK can name the call and the line.
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_Group group, world_group;
  MPI_CHECK(MPI_Comm_group(comm_, &group));
  MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  std::vector<int> mine(size_);
  for (int i = 0; i < size_; ++i) mine[i] = i;
  world_ranks_.resize(size_);
  MPI_CHECK(MPI_Group_translate_ranks(group, size_, mine.data(), world_group, world_ranks_.data()));
  MPI_CHECK(MPI_Group_free(&group));
  MPI_CHECK(MPI_Group_free(&world_group));
}

ProcessGroup::~ProcessGroup() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (owns_ && !fin) MPI_Comm_free(&comm_);
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  MPI_Comm sub;
  MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
  if (sub == MPI_COMM_NULL) return nullptr;  // color == MPI_UNDEFINED
  return std::make_shared<ProcessGroup>(sub, /*owns=*/true);
}

void ProcessGroup::count(const char* op, double bytes) {
  stats_.bytes[op] += size_ == 1 ? 0.0 : bytes;
  stats_.calls[op] += 1;
}

void ProcessGroup::all_reduce(Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

void ProcessGroup::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  check_comm_tensor(input, "reduce_scatter", true);
  check_comm_tensor(output, "reduce_scatter", true);
  LLMP_CHECK(input.numel() == size_ * output.numel(),
             "reduce_scatter: input " + input.describe() + " must hold N=" + str(size_) +
                 " chunks of the output " + output.describe());
  LLMP_CHECK(!overlaps(input, output), "reduce_scatter: input and output overlap");
  count("reduce_scatter", double(size_ - 1) / size_ * input.nbytes());
  if (size_ == 1) return local_copy(input, output);
  MPI_Request req;
  MPI_CHECK(MPI_Ireduce_scatter_block(input.raw(), output.raw(),
                                      mpi_count(output.numel(), "reduce_scatter"), MPI_FLOAT,
                                      mpi_op(op), comm_, &req));
  mpi_wait(&req);
  if (op == ReduceOp::kAvg) scale_f32(output, 1.0f / size_);
}

void ProcessGroup::reduce_scatter_v(const Tensor& input, Tensor& output,
                                    const std::vector<int64_t>& counts, ReduceOp op) {
  reduce_scatter_v_async(input, output, counts, op)->wait();
}

void ProcessGroup::all_gather(const Tensor& input, Tensor& output) {
  check_comm_tensor(input, "all_gather", false);
  check_comm_tensor(output, "all_gather", false);
  LLMP_CHECK(input.dtype() == output.dtype() && output.numel() == size_ * input.numel(),
             "all_gather: output " + output.describe() + " must hold N=" + str(size_) +
                 " chunks of the input " + input.describe());
  count("all_gather", double(size_ - 1) / size_ * output.nbytes());
  if (size_ == 1) return local_copy(input, output);
  // In place when the input is this rank's chunk of the output (ZeRO's shard of a flat buffer).
  const char* chunk = static_cast<const char*>(output.raw()) + rank_ * input.nbytes();
  const bool in_place = input.raw() == chunk;
  LLMP_CHECK(in_place || !overlaps(input, output),
             "all_gather: input overlaps the output other than as chunk r of it");
  int k = mpi_count(input.numel(), "all_gather");
  MPI_Datatype dt = mpi_datatype(input.dtype());
  MPI_Request req;
  MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : input.raw(), k, dt, output.raw(), k, dt,
                           comm_, &req));
  mpi_wait(&req);
}

void ProcessGroup::all_gather_v(const Tensor& input, Tensor& output,
                                const std::vector<int64_t>& counts) {
  all_gather_v_async(input, output, counts)->wait();
}

void ProcessGroup::broadcast(Tensor& t, int root) {
  check_comm_tensor(t, "broadcast", false);
  LLMP_CHECK(root >= 0 && root < size_,
             "broadcast: root " + str(root) + " is not a rank of a group of " + str(size_));
  count("broadcast", double(t.nbytes()));
  if (size_ == 1) return;
  MPI_Request req;
  MPI_CHECK(MPI_Ibcast(t.raw(), mpi_count(t.numel(), "broadcast"), mpi_datatype(t.dtype()), root,
                       comm_, &req));
  mpi_wait(&req);
}

void ProcessGroup::reduce(Tensor& t, int root, ReduceOp op) {
  check_comm_tensor(t, "reduce", true);
  LLMP_CHECK(root >= 0 && root < size_,
             "reduce: root " + str(root) + " is not a rank of a group of " + str(size_));
  count("reduce", double(t.nbytes()));
  if (size_ == 1) return;
  const bool is_root = rank_ == root;
  MPI_Request req;
  MPI_CHECK(MPI_Ireduce(is_root ? MPI_IN_PLACE : t.raw(), is_root ? t.raw() : nullptr,
                        mpi_count(t.numel(), "reduce"), MPI_FLOAT, mpi_op(op), root, comm_, &req));
  mpi_wait(&req);
  if (is_root && op == ReduceOp::kAvg) scale_f32(t, 1.0f / size_);
}

void ProcessGroup::all_to_all(const Tensor& input, Tensor& output) {
  check_comm_tensor(input, "all_to_all", false);
  check_comm_tensor(output, "all_to_all", false);
  LLMP_CHECK(input.dtype() == output.dtype() && input.numel() == output.numel() &&
                 input.numel() % size_ == 0,
             "all_to_all: input " + input.describe() + " and output " + output.describe() +
                 " must match and split into N=" + str(size_) + " chunks");
  LLMP_CHECK(!overlaps(input, output), "all_to_all: input and output overlap");
  count("all_to_all", double(size_ - 1) / size_ * input.nbytes());
  if (size_ == 1) return local_copy(input, output);
  int k = mpi_count(input.numel() / size_, "all_to_all");
  MPI_Datatype dt = mpi_datatype(input.dtype());
  MPI_Request req;
  MPI_CHECK(MPI_Ialltoall(input.raw(), k, dt, output.raw(), k, dt, comm_, &req));
  mpi_wait(&req);
}

void ProcessGroup::send(const Tensor& t, int dst, int tag) { isend(t, dst, tag)->wait(); }

void ProcessGroup::recv(Tensor& t, int src, int tag) { irecv(t, src, tag)->wait(); }

void ProcessGroup::barrier() {
  count("barrier", 0.0);
  if (size_ == 1) return;
  MPI_Request req;
  MPI_CHECK(MPI_Ibarrier(comm_, &req));
  mpi_wait(&req);
}

}  // namespace llmp
