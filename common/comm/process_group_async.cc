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
  keep_alive.clear();
}

// --- uneven collectives ---

std::shared_ptr<Work> MpiProcessGroup::start_reduce_scatter_v(const Tensor& input, Tensor& output,
                                                              const std::vector<int64_t>& counts,
                                                              ReduceOp op) {
  auto w = mpi_work({input, output}, op, output, size());
  w->site = {"reduce_scatter_v", this};
  mpi_counts_displs(counts, "reduce_scatter_v", &w->counts, &w->displs);
  MPI_CHECK(MPI_Ireduce_scatter(input.raw(), output.raw(), w->counts.data(),
                                mpi_datatype(input.dtype()), mpi_op(op, input.dtype()), comm_,
                                &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_all_gather_v(const Tensor& input, Tensor& output,
                                                          const std::vector<int64_t>& counts,
                                                          bool in_place) {
  auto w = mpi_work({input, output});
  w->site = {"all_gather_v", this};
  mpi_counts_displs(counts, "all_gather_v", &w->counts, &w->displs);
  const MPI_Datatype dt = mpi_datatype(input.dtype());
  MPI_CHECK(MPI_Iallgatherv(in_place ? MPI_IN_PLACE : input.raw(), w->counts[rank()], dt,
                            output.raw(), w->counts.data(), w->displs.data(), dt, comm_,
                            &w->request));
  return w;
}

// --- point to point ---

std::shared_ptr<Work> MpiProcessGroup::start_send(const Tensor& t, int dst, int tag) {
  auto w = mpi_work({t});
  w->site = {"send", this, dst, /*peer_is_source=*/false};
  MPI_CHECK(MPI_Isend(t.raw(), mpi_count(t.numel(), "send"), mpi_datatype(t.dtype()), dst, tag,
                      comm_, &w->request));
  return w;
}

std::shared_ptr<Work> MpiProcessGroup::start_recv(Tensor& t, int src, int tag) {
  auto w = mpi_work({t});
  w->site = {"recv", this, src, /*peer_is_source=*/true};
  w->expect_recv = t.numel();
  w->what = "recv on rank " + str(rank()) + " from rank " + str(src) + " (tag " + str(tag) + ")";
  MPI_CHECK(MPI_Irecv(t.raw(), mpi_count(t.numel(), "recv"), mpi_datatype(t.dtype()), src, tag,
                      comm_, &w->request));
  return w;
}

}  // namespace llmp
