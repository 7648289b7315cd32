// Lab ddp_buckets, reference solution (for instructors; students start from ../starter.cc).
//
// The buckets are made once, walking the parameters from the last to the first. Each step keeps,
// per bucket, how many of its parameters are not ready yet; a ready parameter decrements its
// bucket's count, and then every bucket from `next` on whose count is 0 starts, in index order,
// so a bucket completed early waits for the ones before it (the same order on every rank). A
// bucket is a narrow() view of grads: all-reduced in place, no copy in or out.
//
// Glossary: P parameters, b bucket index, next the first bucket not started this step.
#include "labs/ddp_buckets/ddp_buckets.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmp::lab {

struct GradBucketer::State {
  ProcessGroup* dp = nullptr;
  Tensor grads;
  std::vector<int> bucket_of;               // per parameter
  std::vector<char> ready;                  // per parameter, this step
  std::vector<int64_t> begin, numel;        // per bucket: its range of grads
  std::vector<int> params, pending;         // per bucket: its parameters, those not ready yet
  int ready_count = 0, next = 0;            // this step
  std::vector<Tensor> views;                // the buckets' views, alive while reduced
  std::vector<std::shared_ptr<Work>> work;  // this step's all_reduces
};

GradBucketer::GradBucketer(ProcessGroup& dp, Tensor& grads, const std::vector<int64_t>& sizes,
                           int64_t cap_bytes)
    : s_(std::make_unique<State>()) {
  const auto bad = [](const std::string& w) { return std::invalid_argument("GradBucketer: " + w); };
  const int P = static_cast<int>(sizes.size());
  if (P == 0) throw bad("no parameters (sizes is empty)");
  int64_t psi = 0;
  for (int i = 0; i < P; ++i) {
    if (sizes[i] < 1)
      throw bad("sizes[" + std::to_string(i) + "] = " + std::to_string(sizes[i]) + " (want >= 1)");
    psi += sizes[i];
  }
  if (cap_bytes < 1) throw bad("cap_bytes = " + std::to_string(cap_bytes) + " (want >= 1)");
  if (grads.dtype() != DType::kF32 || grads.device() != Device::kCPU)
    throw bad("grads is not a host f32 tensor");
  if (grads.numel() != psi)
    throw bad("grads has " + std::to_string(grads.numel()) + " elements, sizes sum to " +
              std::to_string(psi));
  State& s = *s_;
  s.dp = &dp, s.grads = grads;
  s.bucket_of.resize(P);
  // Parameters P-1 .. 0 into buckets; a bucket closes once it holds >= cap_bytes.
  int64_t end = psi, bytes = 0;  // end: one past the open bucket's last element
  int count = 0;  // parameters in the open bucket
  for (int i = P - 1; i >= 0; --i) {
    bytes += 4 * sizes[i], ++count;
    s.bucket_of[i] = static_cast<int>(s.params.size());
    if (bytes >= cap_bytes || i == 0) {
      const int64_t n = bytes / 4;
      s.begin.push_back(end - n), s.numel.push_back(n), s.params.push_back(count);
      end -= n, bytes = 0, count = 0;
    }
  }
  s.pending = s.params, s.ready.assign(P, 0), s.views.resize(s.params.size());
}

GradBucketer::~GradBucketer() = default;  // a Work not waited for waits in its destructor

void GradBucketer::on_grad_ready(int i) {
  State& s = *s_;
  const int P = static_cast<int>(s.ready.size());
  if (i < 0 || i >= P)
    throw std::invalid_argument("on_grad_ready: i = " + std::to_string(i) +
                                " (want 0 <= i < " + std::to_string(P) + ")");
  if (s.ready[i])
    throw std::invalid_argument("on_grad_ready: parameter " + std::to_string(i) +
                                " is already ready this step");
  s.ready[i] = 1, ++s.ready_count, --s.pending[s.bucket_of[i]];
  const int buckets = static_cast<int>(s.pending.size());
  while (s.next < buckets && s.pending[s.next] == 0) {  // in bucket order, never past a gap
    const int b = s.next++;
    s.views[b] = s.grads.narrow(s.begin[b], s.numel[b]);
    s.work.push_back(s.dp->all_reduce_async(s.views[b], ReduceOp::kAvg));
  }
}

void GradBucketer::finish() {
  State& s = *s_;
  const int P = static_cast<int>(s.ready.size());
  if (s.ready_count < P)
    throw std::logic_error("finish: " + std::to_string(P - s.ready_count) + " of " +
                           std::to_string(P) + " parameters not ready");
  for (auto& w : s.work) w->wait();
  s.work.clear();
  s.pending = s.params, s.ready.assign(P, 0), s.ready_count = 0, s.next = 0;
}

}  // namespace llmp::lab
