// How the ring cores (ring_self_attention, ring_attention) wait for their messages, and how long.
//
// Both issue the transfer of the next block (irecv from r − 1, isend to r + 1) BEFORE computing
// with the block they hold, and wait for it after: the transfer may run under the computation.
// Whether it does is the backend's business: MPICH without an asynchronous progress thread moves
// a message larger than its eager limit only while a rank is inside an MPI call, so the bytes of
// a large block cross during the wait, after the computation, whatever order the calls were
// issued in. To MEASURE what the order buys, every wait goes through wait() (timed), and
// `overlap = false` waits for each transfer right after issuing it (the computation then starts
// only when the block has arrived): stages/long_sequences' overlap table runs both.
//
// Glossary: r this rank, p ranks of the ring.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "common/comm/process_group.h"

namespace llmp {

struct RingWaits {
  /// true (the default): wait after the computation; false: right after issuing (no overlap).
  bool overlap = true;
  double seconds = 0;  ///< wall time inside the ring cores' waits since the last reset
  int64_t waits = 0;   ///< waits counted

  /// The process's instance (one rank per process).
  static RingWaits& instance() {
    static RingWaits w;
    return w;
  }
  void reset() { seconds = 0, waits = 0; }
  /// Waits for `w` (nothing for nullptr), timed.
  void wait(const std::shared_ptr<Work>& w) {
    if (!w) return;
    const auto t0 = std::chrono::steady_clock::now();
    w->wait();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++waits;
  }
  /// Called right after issuing a transfer: without overlap, waits for it now.
  void issued(const std::shared_ptr<Work>& a, const std::shared_ptr<Work>& b = nullptr) {
    if (overlap) return;
    wait(a);
    wait(b);
  }
};

}  // namespace llmp
