// How much of the gradient communication a DDP step hid behind its backward.
//
// Per step, for every bucket b the meter records when its all_reduce was launched (l_b) and when
// this rank first saw it complete (d_b: a Work::test() poll between units returned true, or the
// final wait() returned), and when the backward returned (t_bwd). Then
//
//   in flight  W = | ∪_b [l_b, d_b] |             time during which some bucket was unfinished
//   hidden       = | ∪_b [l_b, d_b] ∩ (-∞, t_bwd] |   ... while backward was still computing
//   exposed      = | ∪_b [l_b, d_b] ∩ [t_bwd, ∞) |    ... while the rank sat in the final waits
//
// and prints "hidden communication: hidden/W % of W ms". It also sums the time spent inside the
// MPI calls themselves (launches, test() polls, waits): with MPI's single-threaded progress
// (MPICH without an async progress thread) bytes move only inside those calls, so that sum is
// the communication cost that stayed on this rank's critical path. Compare both with naive DP's
// blocking all_reduce time (stages/naive_dp report), the same bytes with nothing to hide behind.
//
// Li et al. 2020 (PyTorch DDP), §3.2: overlapping computation with communication.
// Glossary: W in-flight time, t_bwd end of backward, l_b / d_b launch / completion of bucket b.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace llmp {

class OverlapMeter {
 public:
  using Clock = std::chrono::steady_clock;

  /// Starts a step with `buckets` buckets (none launched yet).
  void begin_step(int buckets);
  void launched(int b) { launch_[b] = Clock::now(); }
  /// Records the first completion of bucket b (later calls are ignored).
  void completed(int b);
  bool is_done(int b) const { return done_set_[b]; }
  /// The backward of the step returned (everything after this is exposed).
  void backward_done() { bwd_end_ = Clock::now(); }
  /// Adds time spent inside an MPI call (launch, test, wait), in ms.
  void add_in_mpi(double ms) { step_in_mpi_ms_ += ms; }
  /// All buckets completed: folds the step into the totals.
  void end_step();

  int64_t steps() const { return steps_; }
  /// Means per step, in ms, over the steps so far (0 before the first).
  double in_flight_ms() const { return mean(in_flight_ms_); }
  double hidden_ms() const { return mean(hidden_ms_); }
  double exposed_ms() const { return mean(exposed_ms_); }
  double in_mpi_ms() const { return mean(in_mpi_ms_); }
  /// hidden / in flight, in [0, 1] (0 when nothing was in flight: one rank).
  double hidden_fraction() const;
  /// "hidden communication: 71% of 4.20 ms per step (exposed after backward 1.22 ms; inside MPI
  /// calls 1.80 ms; mean of 30 steps)".
  std::string summary() const;

  static double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  }

 private:
  double mean(double total) const { return steps_ ? total / steps_ : 0.0; }
  std::vector<Clock::time_point> launch_, done_;
  std::vector<bool> done_set_;
  Clock::time_point bwd_end_;
  double step_in_mpi_ms_ = 0;
  double in_flight_ms_ = 0, hidden_ms_ = 0, exposed_ms_ = 0, in_mpi_ms_ = 0;
  int64_t steps_ = 0;
};

}  // namespace llmp
