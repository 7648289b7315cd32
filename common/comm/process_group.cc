// ProcessGroup, the part every backend shares (process_group.h): argument checks, byte
// accounting by the ring factors, the one-rank group, and the blocking forms (start + wait).
// Backends only move data, in the protected hooks (e.g. process_group_mpi.cc).
//
// Bytes are counted per rank before the operation starts:
//   all_reduce 2(N-1)/N·S   reduce_scatter, all_gather, all_to_all (N-1)/N·S
//   broadcast, reduce S     send S (recv 0)      on a group of one rank: 0, and nothing is sent.
//
// Glossary: N = size_, r = rank_, S = bytes of the full tensor, k = elements per rank's chunk.
#include "common/comm/process_group.h"

#include "common/runtime/check.h"

namespace llmp {

namespace {
// What completed_work() returns: nothing is pending.
class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};
}  // namespace

std::shared_ptr<Work> completed_work() { return std::make_shared<CompletedWork>(); }

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// True when the byte ranges of `a` and `b` intersect (send and receive buffers must not alias,
// except for the in-place forms).
bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const char* pa = static_cast<const char*>(a.raw());
  const char* pb = static_cast<const char*>(b.raw());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace

double CommStats::total_bytes() const {
  double total = 0;
  for (const auto& kv : bytes) total += kv.second;
  return total;
}

double CommStats::bytes_of(const std::string& op) const {
  const auto it = bytes.find(op);
  return it == bytes.end() ? 0.0 : it->second;
}

int64_t CommStats::calls_of(const std::string& op) const {
  const auto it = calls.find(op);
  return it == calls.end() ? 0 : it->second;
}

std::string CommStats::calls_str() const {
  std::string s;
  for (const auto& kv : calls) s += " " + kv.first + " ×" + std::to_string(kv.second);
  return s.empty() ? " (none)" : s;
}

CommStats merge_stats(const std::vector<const ProcessGroup*>& groups) {
  CommStats out;
  for (const ProcessGroup* g : groups) {
    for (const auto& kv : g->stats().bytes) out.bytes[kv.first] += kv.second;
    for (const auto& kv : g->stats().calls) out.calls[kv.first] += kv.second;
  }
  return out;
}

ProcessGroup::ProcessGroup(int rank, int size, std::vector<int> world_ranks)
    : rank_(rank), size_(size), world_ranks_(std::move(world_ranks)) {
  LLMP_CHECK(size_ >= 1 && rank_ >= 0 && rank_ < size_ &&
                 static_cast<int>(world_ranks_.size()) == size_,
             "rank " + str(rank_) + " of a group of " + str(size_) + " with " +
                 str(world_ranks_.size()) + " world ranks");
}

void ProcessGroup::count(const char* op, double bytes) {
  stats_.bytes[op] += size_ == 1 ? 0.0 : bytes;
  stats_.calls[op] += 1;
}

void ProcessGroup::check_tensor(const Tensor& t, const char* op, bool reduces) const {
  if (!accepts(t.device()))
    fail_at(__FILE__, __LINE__,
            std::string(op) + ": this group's backend takes " + to_string(device()) +
                " tensors, got " + t.describe());
  if (reduces && t.dtype() == DType::kU8)
    fail_at(__FILE__, __LINE__,
            std::string(op) + " adds elements and takes f32, f64, f16 or bf16 tensors only, got " +
                t.describe());
}

void ProcessGroup::local_copy(const Tensor& src, Tensor& dst) {
  if (src.nbytes() > 0 && src.raw() != dst.raw()) dst.copy_from(src);
}

// --- reductions ---

void ProcessGroup::all_reduce(Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

std::shared_ptr<Work> ProcessGroup::all_reduce_async(Tensor& t, ReduceOp op) {
  check_tensor(t, "all_reduce", true);
  count("all_reduce", 2.0 * (size_ - 1) / size_ * t.nbytes());
  if (size_ == 1) return completed_work();  // the sum, max or mean of one tensor is itself
  return start_all_reduce(t, op);
}

void ProcessGroup::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  check_tensor(input, "reduce_scatter", true);
  check_tensor(output, "reduce_scatter", true);
  LLMP_CHECK(input.dtype() == output.dtype() && input.numel() == size_ * output.numel(),
             "reduce_scatter: input " + input.describe() + " must hold N=" + str(size_) +
                 " chunks of the output " + output.describe());
  LLMP_CHECK(!overlaps(input, output), "reduce_scatter: input and output overlap");
  count("reduce_scatter", double(size_ - 1) / size_ * input.nbytes());
  if (size_ == 1) return local_copy(input, output);
  start_reduce_scatter(input, output, op)->wait();
}

void ProcessGroup::reduce_scatter_v(const Tensor& input, Tensor& output,
                                    const std::vector<int64_t>& counts, ReduceOp op) {
  reduce_scatter_v_async(input, output, counts, op)->wait();
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_v_async(const Tensor& input, Tensor& output,
                                                           const std::vector<int64_t>& counts,
                                                           ReduceOp op) {
  check_tensor(input, "reduce_scatter_v", true);
  check_tensor(output, "reduce_scatter_v", true);
  LLMP_CHECK(static_cast<int>(counts.size()) == size_,
             "reduce_scatter_v: " + str(counts.size()) + " counts for N=" + str(size_) + " ranks");
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  LLMP_CHECK(input.dtype() == output.dtype() && total == input.numel() &&
                 output.numel() == counts[rank_],
             "reduce_scatter_v: counts sum to " + str(total) + " for input " + input.describe() +
                 "; rank " + str(rank_) + " receives " + str(counts[rank_]) + " into output " +
                 output.describe());
  LLMP_CHECK(!overlaps(input, output), "reduce_scatter_v: input and output overlap");
  count("reduce_scatter", double(size_ - 1) / size_ * input.nbytes());
  if (size_ == 1) {
    local_copy(input, output);
    return completed_work();
  }
  return start_reduce_scatter_v(input, output, counts, op);
}

void ProcessGroup::reduce(Tensor& t, int root, ReduceOp op) {
  check_tensor(t, "reduce", true);
  LLMP_CHECK(root >= 0 && root < size_,
             "reduce: root " + str(root) + " is not a rank of a group of " + str(size_));
  count("reduce", double(t.nbytes()));
  if (size_ == 1) return;
  start_reduce(t, root, op)->wait();
}

// --- data movement ---

void ProcessGroup::all_gather(const Tensor& input, Tensor& output) {
  check_tensor(input, "all_gather", false);
  check_tensor(output, "all_gather", false);
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
  start_all_gather(input, output, in_place)->wait();
}

void ProcessGroup::all_gather_v(const Tensor& input, Tensor& output,
                                const std::vector<int64_t>& counts) {
  all_gather_v_async(input, output, counts)->wait();
}

std::shared_ptr<Work> ProcessGroup::all_gather_v_async(const Tensor& input, Tensor& output,
                                                       const std::vector<int64_t>& counts) {
  check_tensor(input, "all_gather_v", false);
  check_tensor(output, "all_gather_v", false);
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
  if (size_ == 1) {
    local_copy(input, output);
    return completed_work();
  }
  // In place when the input is this rank's slice of the output.
  const char* slice = static_cast<const char*>(output.raw()) + before * dtype_size(input.dtype());
  const bool in_place = input.numel() > 0 && input.raw() == slice;
  LLMP_CHECK(in_place || !overlaps(input, output),
             "all_gather_v: input overlaps the output other than as rank r's slice of it");
  return start_all_gather_v(input, output, counts, in_place);
}

void ProcessGroup::broadcast(Tensor& t, int root) {
  check_tensor(t, "broadcast", false);
  LLMP_CHECK(root >= 0 && root < size_,
             "broadcast: root " + str(root) + " is not a rank of a group of " + str(size_));
  count("broadcast", double(t.nbytes()));
  if (size_ == 1) return;
  start_broadcast(t, root)->wait();
}

void ProcessGroup::all_to_all(const Tensor& input, Tensor& output) {
  check_tensor(input, "all_to_all", false);
  check_tensor(output, "all_to_all", false);
  LLMP_CHECK(input.dtype() == output.dtype() && input.numel() == output.numel() &&
                 input.numel() % size_ == 0,
             "all_to_all: input " + input.describe() + " and output " + output.describe() +
                 " must match and split into N=" + str(size_) + " chunks");
  LLMP_CHECK(!overlaps(input, output), "all_to_all: input and output overlap");
  count("all_to_all", double(size_ - 1) / size_ * input.nbytes());
  if (size_ == 1) return local_copy(input, output);
  start_all_to_all(input, output)->wait();
}

// --- point to point (also on a group of one rank: a rank may message itself) ---

void ProcessGroup::send(const Tensor& t, int dst, int tag) { isend(t, dst, tag)->wait(); }

void ProcessGroup::recv(Tensor& t, int src, int tag) { irecv(t, src, tag)->wait(); }

std::shared_ptr<Work> ProcessGroup::isend(const Tensor& t, int dst, int tag) {
  check_tensor(t, "send", false);
  LLMP_CHECK(dst >= 0 && dst < size_,
             "send: destination " + str(dst) + " is not a rank of a group of " + str(size_));
  count("send", double(t.nbytes()));
  return start_send(t, dst, tag);
}

std::shared_ptr<Work> ProcessGroup::irecv(Tensor& t, int src, int tag) {
  check_tensor(t, "recv", false);
  LLMP_CHECK(src >= 0 && src < size_,
             "recv: source " + str(src) + " is not a rank of a group of " + str(size_));
  count("recv", 0.0);  // the sender counts the bytes
  return start_recv(t, src, tag);
}

void ProcessGroup::barrier() {
  count("barrier", 0.0);
  if (size_ == 1) return;
  start_barrier()->wait();
}

// --- new groups ---

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  LLMP_CHECK(color >= 0 || color == kNoColor,
             "split: color " + str(color) + " must be >= 0, or kNoColor to join no group");
  return make_split(color, key);
}

std::shared_ptr<ProcessGroup> ProcessGroup::duplicate() {
  auto dup = make_duplicate();
  dup->set_name(name_);
  return dup;
}

// --- the watchdog's limit ---

namespace {
double g_comm_timeout_s = 0;  // off until a trainer sets --timeout
}  // namespace

void set_comm_timeout(double seconds) {
  LLMP_CHECK(seconds >= 0, "comm timeout " + std::to_string(seconds) + " s must be >= 0");
  g_comm_timeout_s = seconds;
}

double comm_timeout() { return g_comm_timeout_s; }

}  // namespace llmp
