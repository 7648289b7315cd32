// Lab ddp_buckets: the adapter header. The tests construct a GradBucketer and call its three
// public functions and nothing else; its state is yours (GradBucketer::State, defined in your
// .cc), so you may organise the code as you like behind them.
//
// DDP's gradient reducer with buckets (Li et al. 2020, "PyTorch Distributed: Experiences on
// Accelerating Data Parallel Training", VLDB, §3.2.2-3.2.3). Data parallelism needs the mean of
// every rank's gradient. One all_reduce per parameter is latency-bound (hundreds of small
// messages); one all_reduce of the whole gradient cannot start before the backward ends, so the
// network idles while the cores work and then the cores idle while the network works. Buckets
// sit between: parameters are grouped, in the order the backward produces their gradients, into
// buckets of about cap bytes, and each bucket's all_reduce starts, asynchronously, the moment
// its last gradient is final, while the backward goes on computing the rest.
//
// Glossary: P parameters (tensors, not elements), Ψ = Σ sizes elements, N = dp.size() ranks,
// cap the bucket capacity in bytes (4 bytes per f32 element), b a bucket's index.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp::lab {

/// Buckets a flat gradient buffer and all-reduces each bucket (the mean over the ranks) as soon
/// as its gradients are ready, overlapping the communication with the rest of the backward.
///
/// Layout. Parameter i's gradient is elements [o_i, o_i + sizes[i]) of `grads`, o_i = Σ_{j<i}
/// sizes[j] (so the parameters tile the buffer in order, and Ψ = grads.numel()).
///
/// Buckets. Walk the parameters from P − 1 down to 0 (the order a backward finishes them: the
/// last layer first), adding each to the current bucket; the bucket closes as soon as it holds
/// at least cap_bytes (4·elements ≥ cap_bytes), and the next one starts. The last bucket holds
/// what is left, maybe less than cap_bytes. Bucket 0 holds parameter P − 1. A bucket is then
/// consecutive parameters, one contiguous range of `grads`. Example: sizes {3, 5, 2, 4, 6},
/// cap_bytes 20: bucket 0 = {4} (24 bytes), 1 = {3, 2} (24), 2 = {1} (20), 3 = {0} (12).
///
/// Launches. The all_reduce of bucket b (ReduceOp::kAvg, all_reduce_async: it must not wait)
/// starts inside the on_grad_ready call that makes the last of its parameters ready, provided
/// buckets 0 .. b − 1 have started; otherwise in the call that starts bucket b − 1, right after
/// it. So every rank starts the same all_reduces in the same order (bucket 0, 1, 2, ...), as
/// collectives must be, whatever order its gradients arrive in.
///
/// Traffic per step: one all_reduce per bucket, of its elements (2(N−1)/N·4·numel bytes each,
/// dp.stats()), together 2(N−1)/N·4Ψ: the same bytes as one all_reduce of the whole buffer, in
/// pieces that start early. No other communication. Host f32 tensors only.
class GradBucketer {
 public:
  /// grads: (Ψ) host f32, the flat gradient buffer, kept by handle (a view of it is fine); the
  ///        caller writes each parameter's gradient into it before calling on_grad_ready.
  /// sizes: P ≥ 1 element counts, each ≥ 1, summing to Ψ. cap_bytes ≥ 1.
  /// Errors: std::invalid_argument, one line naming the value, e.g.
  ///   "GradBucketer: no parameters (sizes is empty)"
  ///   "GradBucketer: sizes[2] = 0 (want >= 1)"
  ///   "GradBucketer: cap_bytes = 0 (want >= 1)"
  ///   "GradBucketer: grads has 19 elements, sizes sum to 20"
  ///   "GradBucketer: grads is not a host f32 tensor"
  /// Not collective: it communicates nothing.
  GradBucketer(ProcessGroup& dp, Tensor& grads, const std::vector<int64_t>& sizes,
               int64_t cap_bytes);
  ~GradBucketer();
  GradBucketer(const GradBucketer&) = delete;
  GradBucketer& operator=(const GradBucketer&) = delete;

  /// Parameter i's gradient is final in grads (this step). Starts every all_reduce that this
  /// makes startable (Launches, above) and returns without waiting for any. Each parameter is
  /// made ready once per step, in any order (the order may differ between ranks).
  /// Errors (std::invalid_argument, before anything starts):
  ///   "on_grad_ready: i = 5 (want 0 <= i < 5)"
  ///   "on_grad_ready: parameter 3 is already ready this step"
  void on_grad_ready(int i);

  /// Ends the step: waits for every bucket's all_reduce; grads then holds the mean over the ranks
  /// of every rank's gradient, within the rounding of a float sum. The next on_grad_ready starts
  /// the next step (every parameter not ready again, the same buckets).
  /// Errors: a step with parameters not ready throws std::logic_error without waiting:
  ///   "finish: 4 of 5 parameters not ready"
  /// Collective over dp (through the all_reduces it waits for).
  void finish();

 private:
  struct State;  // yours: define it in your .cc (the starter has an empty one)
  std::unique_ptr<State> s_;
};

}  // namespace llmp::lab
