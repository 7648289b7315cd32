// MpiProcessGroup (mpi_process_group.h), part 2: MpiWork (an MPI request plus what must outlive
// it) and the hooks whose Work carries more than a request: the v-collectives (counts and
// displacements MPI reads during the operation), send, and recv (the received length is checked
// on completion). The even collectives are in process_group_mpi.cc.
//
// Overlap is the point (DDP launches a bucket's all_reduce while backward computes the next
// bucket; 1F1B posts irecv before computing). MPI progresses a request inside MPI calls, so a
// caller that computes for long should call test() now and then, which drives progress.
// kAvg is a sum on the wire; the division by N happens when the Work completes (wait or test).
//
// Glossary: N = size(), r = rank(), S = bytes (all_reduce operand, reduce_scatter input,
// all_gather output, sent tensor).
#include "common/comm/mpi_process_group.h"
#include "common/runtime/check.h"

namespace llmp {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

// --- MpiWork ---

std::shared_ptr<MpiWork> mpi_work(std::vector<Tensor> tensors, ReduceOp op, const Tensor& average,
                                  int ranks) {
  auto w = std::make_shared<MpiWork>();
  w->keep_alive = std::move(tensors);
  if (op == ReduceOp::kAvg) {
    w->average = average;
    w->ranks = ranks;
  }
  return w;
}

MpiWork::~MpiWork() {
  // A pending non-blocking collective cannot be cancelled or freed (MPI-3.1 §5.12); complete it.
  int fin = 0;
  MPI_Finalized(&fin);
  if (!done_ && !fin) wait();
}

void MpiWork::wait() {
  if (done_) return;
  MPI_Status status;
  if (label_) site.op = label_;
  mpi_wait(&request, &status, site);
  finish(status);
}

bool MpiWork::test() {
  if (done_) return true;
  int flag = 0;
  MPI_Status status;
  MPI_CHECK(MPI_Test(&request, &flag, &status));
  if (flag) finish(status);
  return flag != 0;
}

void MpiWork::finish(const MPI_Status& status) {
  done_ = true;
  if (average.defined() && ranks > 1) scale(average, 1.0 / ranks);
  if (expect_recv >= 0) {
    MPI_Datatype dt = mpi_datatype(keep_alive[0].dtype());
    int got = 0;
    MPI_CHECK(MPI_Get_count(&status, dt, &got));
    LLMP_CHECK(got == expect_recv, what + ": expected " + str(expect_recv) +
                                       " elements, the sender sent " + str(got));
  }
  if (staging.pool) staging.settle();  // after the division: the device gets the mean
  keep_alive.clear();
}

// --- uneven collectives ---

std::shared_ptr<Work> MpiProcessGroup::start_reduce_scatter_v(const Tensor& input, Tensor& output,
                                                              const std::vector<int64_t>& counts,
                                                              ReduceOp op) {
  StagingDebt d = debt();
  Tensor in = stage(&d, input, true, false), out = stage(&d, output, false, true);
  auto w = mpi_work({in, out}, op, out, size());
  w->site = {"reduce_scatter_v", this};
  w->staging = std::move(d);
  mpi_counts_displs(counts, "reduce_scatter_v", &w->counts, &w->displs);
  MPI_CHECK(MPI_Ireduce_scatter(in.raw(), out.raw(), w->counts.data(), mpi_datatype(in.dtype()),
                                mpi_op(op, in.dtype()), comm_, &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_all_gather_v(const Tensor& input, Tensor& output,
                                                          const std::vector<int64_t>& counts,
                                                          bool in_place) {
  StagingDebt d = debt();
  int64_t before = 0;  // this rank's slice starts after the earlier ranks' counts
  for (int i = 0; i < rank(); ++i) before += counts[i];
  Tensor out = stage(&d, output, false, true);
  Tensor in = in_place ? out.narrow(before, input.numel()) : stage(&d, input, true, false);
  if (in_place && output.device() != Device::kCPU) staging_->copy_down(input, in);
  auto w = mpi_work({in, out});
  w->site = {"all_gather_v", this};
  w->staging = std::move(d);
  mpi_counts_displs(counts, "all_gather_v", &w->counts, &w->displs);
  const MPI_Datatype dt = mpi_datatype(in.dtype());
  MPI_CHECK(MPI_Iallgatherv(in_place ? MPI_IN_PLACE : in.raw(), w->counts[rank()], dt, out.raw(),
                            w->counts.data(), w->displs.data(), dt, comm_, &w->request));
  return w;
}

// --- point to point ---

std::shared_ptr<Work> MpiProcessGroup::start_send(const Tensor& t, int dst, int tag) {
  StagingDebt d = debt();
  Tensor h = stage(&d, t, /*down=*/true, /*up=*/false);
  auto w = mpi_work({h});
  w->site = {"send", this, dst, /*peer_is_source=*/false};
  w->staging = std::move(d);
  MPI_CHECK(MPI_Isend(h.raw(), mpi_count(h.numel(), "send"), mpi_datatype(h.dtype()), dst, tag,
                      comm_, &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_recv(Tensor& t, int src, int tag) {
  StagingDebt d = debt();
  Tensor h = stage(&d, t, /*down=*/false, /*up=*/true);
  auto w = mpi_work({h});
  w->site = {"recv", this, src, /*peer_is_source=*/true};
  w->staging = std::move(d);
  w->expect_recv = h.numel();
  w->what = "recv on rank " + str(rank()) + " from rank " + str(src) + " (tag " + str(tag) + ")";
  MPI_CHECK(MPI_Irecv(h.raw(), mpi_count(h.numel(), "recv"), mpi_datatype(h.dtype()), src, tag,
                      comm_, &w->request));
  return w;
}

}  // namespace llmp
