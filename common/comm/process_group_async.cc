// ProcessGroup over MPI, non-blocking operations: Work (an MPI_Request plus what must outlive it)
// and all_reduce_async, reduce_scatter_v_async, all_gather_v_async, isend, irecv. The blocking
// all_reduce, reduce_scatter_v, all_gather_v, send and recv are these followed by wait().
//
// Overlap is the point (DDP launches a bucket's all_reduce while backward computes the next
// bucket; 1F1B posts irecv before computing). MPI progresses a request inside MPI calls, so a
// caller that computes for long should call test() now and then, which drives progress.
// kAvg is a sum on the wire; the division by N happens when the Work completes (wait or test).
// Bytes are counted at issue, by the same formulas as the blocking forms (process_group.h).
//
// Glossary: N = size_, r = rank_, S = bytes (all_reduce operand, reduce_scatter input,
// all_gather output, sent tensor).
#include "common/comm/mpi_util.h"
#include "common/comm/process_group.h"
#include "common/runtime/check.h"

namespace llmp {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// One MPI request and everything MPI may still read or write until it completes: the tensors
// (their storage is reference counted, so holding a Tensor keeps the bytes alive) and the
// counts/displacement arrays of the v-collectives (MPI reads them during the operation).
class MpiWork final : public Work {
 public:
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<Tensor> keep_alive;
  std::vector<int> counts, displs;
  Tensor average;            // divided by `ranks` on completion (kAvg); undefined otherwise
  int ranks = 1;
  int64_t expect_recv = -1;  // irecv: elements expected; checked against the status
  std::string what;          // irecv: "recv from rank 1 (tag 0)"

  ~MpiWork() override {
    // A pending non-blocking collective cannot be cancelled or freed (MPI-3.1 §5.12); complete it.
    int fin = 0;
    MPI_Finalized(&fin);
    if (!done_ && !fin) wait();
  }

  void wait() override {
    if (done_) return;
    MPI_Status status;
    mpi_wait(&request, &status);
    finish(status);
  }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_Status status;
    MPI_CHECK(MPI_Test(&request, &flag, &status));
    if (flag) finish(status);
    return flag != 0;
  }

 private:
  void finish(const MPI_Status& status) {
    done_ = true;
    if (average.defined() && ranks > 1) scale_f32(average, 1.0f / ranks);
    if (expect_recv >= 0) {
      MPI_Datatype dt = mpi_datatype(keep_alive[0].dtype());
      int got = 0;
      MPI_CHECK(MPI_Get_count(&status, dt, &got));
      LLMP_CHECK(got == expect_recv, what + ": expected " + str(expect_recv) +
                                         " elements, the sender sent " + str(got));
    }
    keep_alive.clear();
  }
  bool done_ = false;
};

}  // namespace

std::shared_ptr<Work> ProcessGroup::all_reduce_async(Tensor& t, ReduceOp op) {
  check_comm_tensor(t, "all_reduce", true);
  count("all_reduce", 2.0 * (size_ - 1) / size_ * t.nbytes());
  auto w = std::make_shared<MpiWork>();
  if (size_ == 1) return w;  // MPI_REQUEST_NULL: complete at once
  w->keep_alive = {t};
  if (op == ReduceOp::kAvg) {
    w->average = t;
    w->ranks = size_;
  }
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, t.raw(), mpi_count(t.numel(), "all_reduce"), MPI_FLOAT,
                           mpi_op(op), comm_, &w->request));
  return w;
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_v_async(const Tensor& input, Tensor& output,
                                                           const std::vector<int64_t>& counts,
                                                           ReduceOp op) {
  check_comm_tensor(input, "reduce_scatter_v", true);
  check_comm_tensor(output, "reduce_scatter_v", true);
  LLMP_CHECK(static_cast<int>(counts.size()) == size_,
             "reduce_scatter_v: " + str(counts.size()) + " counts for N=" + str(size_) + " ranks");
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  LLMP_CHECK(total == input.numel() && output.numel() == counts[rank_],
             "reduce_scatter_v: counts sum to " + str(total) + " for input " + input.describe() +
                 "; rank " + str(rank_) + " receives " + str(counts[rank_]) + " into output " +
                 output.describe());
  LLMP_CHECK(!overlaps(input, output), "reduce_scatter_v: input and output overlap");
  count("reduce_scatter", double(size_ - 1) / size_ * input.nbytes());
  auto w = std::make_shared<MpiWork>();
  if (size_ == 1) {
    if (output.nbytes() > 0) output.copy_from(input);
    return w;
  }
  mpi_counts_displs(counts, "reduce_scatter_v", &w->counts, &w->displs);
  w->keep_alive = {input, output};
  if (op == ReduceOp::kAvg) {
    w->average = output;
    w->ranks = size_;
  }
  MPI_CHECK(MPI_Ireduce_scatter(input.raw(), output.raw(), w->counts.data(), MPI_FLOAT, mpi_op(op),
                                comm_, &w->request));
  return w;
}

std::shared_ptr<Work> ProcessGroup::all_gather_v_async(const Tensor& input, Tensor& output,
                                                       const std::vector<int64_t>& counts) {
  check_comm_tensor(input, "all_gather_v", false);
  check_comm_tensor(output, "all_gather_v", false);
  LLMP_CHECK(static_cast<int>(counts.size()) == size_,
             "all_gather_v: " + str(counts.size()) + " counts for N=" + str(size_) + " ranks");
  int64_t total = 0, before = 0;
  for (int i = 0; i < size_; ++i) total += counts[i], before += i < rank_ ? counts[i] : 0;
  LLMP_CHECK(input.dtype() == output.dtype() && input.numel() == counts[rank_] &&
                 output.numel() == total,
             "all_gather_v: rank " + str(rank_) + " sends " + str(counts[rank_]) + " from input " +
                 input.describe() + "; counts sum to " + str(total) + " for output " +
                 output.describe());
  count("all_gather", double(size_ - 1) / size_ * output.nbytes());
  auto w = std::make_shared<MpiWork>();
  if (size_ == 1) {
    if (input.nbytes() > 0 && input.raw() != output.raw()) output.copy_from(input);
    return w;
  }
  // In place when the input is this rank's slice of the output.
  const char* slice = static_cast<const char*>(output.raw()) + before * dtype_size(input.dtype());
  const bool in_place = input.numel() > 0 && input.raw() == slice;
  LLMP_CHECK(in_place || !overlaps(input, output),
             "all_gather_v: input overlaps the output other than as rank r's slice of it");
  mpi_counts_displs(counts, "all_gather_v", &w->counts, &w->displs);
  w->keep_alive = {input, output};
  MPI_Datatype dt = mpi_datatype(input.dtype());
  MPI_CHECK(MPI_Iallgatherv(in_place ? MPI_IN_PLACE : input.raw(), w->counts[rank_], dt,
                            output.raw(), w->counts.data(), w->displs.data(), dt, comm_,
                            &w->request));
  return w;
}

std::shared_ptr<Work> ProcessGroup::isend(const Tensor& t, int dst, int tag) {
  check_comm_tensor(t, "send", false);
  LLMP_CHECK(dst >= 0 && dst < size_,
             "send: destination " + str(dst) + " is not a rank of a group of " + str(size_));
  count("send", double(t.nbytes()));
  auto w = std::make_shared<MpiWork>();
  w->keep_alive = {t};
  MPI_CHECK(MPI_Isend(t.raw(), mpi_count(t.numel(), "send"), mpi_datatype(t.dtype()), dst, tag,
                      comm_, &w->request));
  return w;
}

std::shared_ptr<Work> ProcessGroup::irecv(Tensor& t, int src, int tag) {
  check_comm_tensor(t, "recv", false);
  LLMP_CHECK(src >= 0 && src < size_,
             "recv: source " + str(src) + " is not a rank of a group of " + str(size_));
  count("recv", 0.0);  // the sender counts the bytes
  auto w = std::make_shared<MpiWork>();
  w->keep_alive = {t};
  w->expect_recv = t.numel();
  w->what = "recv on rank " + str(rank_) + " from rank " + str(src) + " (tag " + str(tag) + ")";
  MPI_CHECK(MPI_Irecv(t.raw(), mpi_count(t.numel(), "recv"), mpi_datatype(t.dtype()), src, tag,
                      comm_, &w->request));
  return w;
}

}  // namespace llmp
