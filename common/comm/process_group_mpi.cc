// MpiProcessGroup (mpi_process_group.h), part 1: construction, ProcessGroup::world() (the
// default backend's world), split and duplicate, and the even collectives (all_reduce,
// reduce_scatter, all_gather, broadcast, reduce, all_to_all, barrier). MpiWork, the
// v-collectives, send and recv live in process_group_async.cc.
//
// The hooks run after ProcessGroup has checked the arguments, counted the bytes and handled the
// one-rank group (process_group.cc), so each one only issues the MPI call. kAvg is a sum here
// (MPI_SUM, or the 16-bit sum of mpi_float16.h: mpi_op); the MpiWork divides by N when it
// completes.
//
// Glossary: N = size(), r = rank(), k = elements per rank's chunk.
#include "common/comm/mpi_process_group.h"

#include "common/comm/mpi_util.h"
#include "common/comm/watchdog.h"
#include "common/runtime/check.h"

namespace llmp {
namespace {

/// check.h's world-wide agreements (all_ranks_ok, stop_if_interrupted) wait like every wait of
/// this backend: polled, under the watchdog (a site without a group is named as the world).
void watched_world_wait(void* request, const char* op) {
  WaitSite site;
  site.op = op;
  mpi_wait(static_cast<MPI_Request*>(request), MPI_STATUS_IGNORE, site);
}

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroup::world() {
  int init = 0;
  MPI_Initialized(&init);
  LLMP_CHECK(init, "MPI is not initialised: call launch_or_init() (common/runtime/launch.h) first");
  auto world = std::make_shared<MpiProcessGroup>(MPI_COMM_WORLD, /*owns=*/false);
  world->set_name("world");
  set_world_wait(watched_world_wait);
  return world;
}

MpiProcessGroup::Layout MpiProcessGroup::layout_of(MPI_Comm comm) {
  LLMP_CHECK(comm != MPI_COMM_NULL, "MpiProcessGroup over MPI_COMM_NULL");
  // Errors come back as return codes so MPI_CHECK can name the call and the line.
  MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  Layout l;
  MPI_CHECK(MPI_Comm_rank(comm, &l.rank));
  MPI_CHECK(MPI_Comm_size(comm, &l.size));
  MPI_Group group, world_group;
  MPI_CHECK(MPI_Comm_group(comm, &group));
  MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  std::vector<int> mine(l.size);
  for (int i = 0; i < l.size; ++i) mine[i] = i;
  l.world_ranks.resize(l.size);
  MPI_CHECK(MPI_Group_translate_ranks(group, l.size, mine.data(), world_group,
                                      l.world_ranks.data()));
  MPI_CHECK(MPI_Group_free(&group));
  MPI_CHECK(MPI_Group_free(&world_group));
  return l;
}

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, bool owns)
    : MpiProcessGroup(comm, owns, layout_of(comm)) {}

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, bool owns, Layout layout)
    : ProcessGroup(layout.rank, layout.size, std::move(layout.world_ranks)),
      comm_(comm),
      owns_(owns) {}

MpiProcessGroup::~MpiProcessGroup() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (owns_ && !fin) MPI_Comm_free(&comm_);
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::make_split(int color, int key) {
  MPI_Comm sub;
  MPI_CHECK(MPI_Comm_split(comm_, color == kNoColor ? MPI_UNDEFINED : color, key, &sub));
  if (sub == MPI_COMM_NULL) return nullptr;  // kNoColor
  return std::make_shared<MpiProcessGroup>(sub, /*owns=*/true);
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::make_duplicate() {
  MPI_Comm dup;
  MPI_CHECK(MPI_Comm_dup(comm_, &dup));  // a new context: its messages never match comm_'s
  return std::make_shared<MpiProcessGroup>(dup, /*owns=*/true);
}

Tensor MpiProcessGroup::stage(StagingDebt* d, const Tensor& t, bool down, bool up) {
  Tensor host = staging_->stage(t, down, &d->leases);
  if (up && t.device() != Device::kCPU) d->up.emplace_back(host, t);
  return host;
}

// Each hook stages its device tensors (process_group_staging.h: what goes down, what comes up)
// and runs MPI on the host stand-ins; for host tensors stage() returns the tensor itself.

std::shared_ptr<Work> MpiProcessGroup::start_all_reduce(Tensor& t, ReduceOp op) {
  StagingDebt d = debt();
  Tensor h = stage(&d, t, /*down=*/true, /*up=*/true);
  auto w = mpi_work({h}, op, h, size());
  w->site = {"all_reduce", this};
  w->staging = std::move(d);
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, h.raw(), mpi_count(h.numel(), "all_reduce"),
                           mpi_datatype(h.dtype()), mpi_op(op, h.dtype()), comm_,
                           &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_reduce_scatter(const Tensor& input, Tensor& output,
                                                            ReduceOp op) {
  StagingDebt d = debt();
  Tensor in = stage(&d, input, true, false), out = stage(&d, output, false, true);
  auto w = mpi_work({in, out}, op, out, size());
  w->site = {"reduce_scatter", this};
  w->staging = std::move(d);
  MPI_CHECK(MPI_Ireduce_scatter_block(in.raw(), out.raw(),
                                      mpi_count(out.numel(), "reduce_scatter"),
                                      mpi_datatype(in.dtype()), mpi_op(op, in.dtype()), comm_,
                                      &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_all_gather(const Tensor& input, Tensor& output,
                                                        bool in_place) {
  StagingDebt d = debt();
  // In place, the input is chunk r of the output: only it goes down, into chunk r of the
  // output's stand-in (a host output is its own stand-in and already holds it).
  Tensor out = stage(&d, output, false, true);
  Tensor in = in_place ? out.narrow(rank() * input.numel(), input.numel())
                       : stage(&d, input, true, false);
  if (in_place && output.device() != Device::kCPU) staging_->copy_down(input, in);
  auto w = mpi_work({in, out});
  w->site = {"all_gather", this};
  w->staging = std::move(d);
  const int k = mpi_count(in.numel(), "all_gather");
  const MPI_Datatype dt = mpi_datatype(in.dtype());
  MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : in.raw(), k, dt, out.raw(), k, dt, comm_,
                           &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_broadcast(Tensor& t, int root) {
  // The root's tensor is read, every other rank's written.
  const bool is_root = rank() == root;
  StagingDebt d = debt();
  Tensor h = stage(&d, t, /*down=*/is_root, /*up=*/!is_root);
  auto w = mpi_work({h});
  w->site = {"broadcast", this};
  w->staging = std::move(d);
  MPI_CHECK(MPI_Ibcast(h.raw(), mpi_count(h.numel(), "broadcast"), mpi_datatype(h.dtype()), root,
                       comm_, &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_reduce(Tensor& t, int root, ReduceOp op) {
  const bool is_root = rank() == root;
  StagingDebt d = debt();
  Tensor h = stage(&d, t, /*down=*/true, /*up=*/is_root);  // only the root's tensor changes
  // Only the root's tensor changes, so only the root divides for kAvg.
  auto w = mpi_work({h}, is_root ? op : ReduceOp::kSum, h, size());
  w->site = {"reduce", this};
  w->staging = std::move(d);
  MPI_CHECK(MPI_Ireduce(is_root ? MPI_IN_PLACE : h.raw(), is_root ? h.raw() : nullptr,
                        mpi_count(h.numel(), "reduce"), mpi_datatype(h.dtype()),
                        mpi_op(op, h.dtype()), root, comm_, &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_all_to_all(const Tensor& input, Tensor& output) {
  StagingDebt d = debt();
  Tensor in = stage(&d, input, true, false), out = stage(&d, output, false, true);
  auto w = mpi_work({in, out});
  w->site = {"all_to_all", this};
  w->staging = std::move(d);
  const int k = mpi_count(in.numel() / size(), "all_to_all");
  const MPI_Datatype dt = mpi_datatype(in.dtype());
  MPI_CHECK(MPI_Ialltoall(in.raw(), k, dt, out.raw(), k, dt, comm_, &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_barrier() {
  auto w = std::make_shared<MpiWork>();
  w->site = {"barrier", this};
  MPI_CHECK(MPI_Ibarrier(comm_, &w->request));
  return w;
}

}  // namespace llmp
