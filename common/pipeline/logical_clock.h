// LogicalClock: when each operation of a pipeline rank would start and end if a forward took one
// unit of time, a backward two, and messages were free — derived from the messages the rank
// really exchanged, not from a replay of the schedule.
//
// Why a logical clock. The bubble of a pipeline schedule (GPipe §2.3, Megatron-LM §2.2, Zero
// Bubble §3) is a statement about dependencies: a rank idles while it waits for a neighbour's
// activations or gradients. Wall-clock time shows it only when every rank has a processor of its
// own; here 4 ranks share 2 cores, so a "waiting" rank is often just descheduled and a "busy"
// one is often waiting for a core, and measured idle time says more about the OS scheduler than
// about the schedule. Lamport's logical clocks (Lamport 1978, "Time, Clocks, and the Ordering of
// Events in a Distributed System") keep exactly the part that matters: the happened-before order
// carried by messages. Each op gets a cost in logical units, each message carries its sender's
// logical time, and the bubble computed from those times is the bubble of the schedule as the
// executor ran it — whichever order it really ran its ops in, whatever message it really waited
// for — and independent of how the ranks were scheduled on the cores.
//
// The math, per rank (now = the logical end of the rank's previous op, 0 at the step's start):
//   compute op X (F, B, W):  start = now,  end = start + cost(X),  now = end
//   send (send_forward/_backward):  start = end = now;  the message carries t_send = now, the
//                            logical end of the op that produced the tensor (sends follow it)
//   recv (recv_forward/_backward):  start = now,  end = max(now, t_send of the message taken),
//                            now = end: the next op starts at the later of the rank's previous
//                            end and its input's arrival (messages take no logical time)
// Costs (the papers' convention for the bubble formulas; Zero Bubble §2 splits B in two):
//   F = 1,  B = 2  (full backward: input and weight gradients),  zero bubble: B = W = 1.
// A chunk op of an interleaved schedule costs the same as a whole-stage op: every op's cost
// scales by the same 1/v, which changes the makespan's unit but no fraction.
//
// From the spans of all ranks (makespan T = the latest end; busy_r = the sum of rank r's
// compute costs): bubble fraction = Σ_r (T - busy_r) / (p·T), timeline.h's bubble_fraction, the
// simulator's definition. Worked example, GPipe p = 2, m = 2: rank 0 F0 [0,1) F1 [1,2), rank 1
// F0 [1,2) F1 [2,3) B1 [3,5) B0 [5,7), rank 0 B1 [5,7) B0 [7,9): T = 9 = 3(m+p-1), busy 6 each,
// bubble fraction 6/18 = 1/3 = (p-1)/(m+p-1).
//
// Glossary: p pipeline stages, m micro-batches, v chunks per rank, F forward, B backward (zero
// bubble: input gradient), W weight gradient, T makespan (logical units).
#pragma once

#include "common/pipeline/schedule.h"

namespace llmp {

/// Logical cost of each compute op, in units of one forward. Sends and recvs cost 0.
struct LogicalCosts {
  double forward = 1.0;          ///< F
  double backward = 2.0;         ///< B, full backward (input and weight gradients)
  double backward_input = 1.0;   ///< zero bubble's B (input gradient)
  double backward_weight = 1.0;  ///< zero bubble's W (weight gradient)

  /// The cost of `op`: one of the above for F, B, B-input, W; 0 for sends and recvs.
  double of(Op op) const;
};

/// [start, end) of one op, in logical units.
struct LogicalInterval {
  double start = 0.0;
  double end = 0.0;
};

/// One rank's logical clock over one step (see the header comment for the rules).
class LogicalClock {
 public:
  explicit LogicalClock(LogicalCosts costs = LogicalCosts{}) : costs_(costs) {}

  /// Back to 0: the start of a step.
  void reset() { now_ = 0.0; }
  /// The logical end of the rank's last op: what a send carries.
  double now() const { return now_; }

  /// A compute op (F, B, B-input or W): [now, now + cost). Throws std::invalid_argument for a
  /// send or recv.
  LogicalInterval compute(Op op);
  /// A send: [now, now]; the message it posts carries now().
  LogicalInterval send() const { return {now_, now_}; }
  /// A recv that took a message carrying `arrival` (its sender's now() at the send):
  /// [now, max(now, arrival)).
  LogicalInterval receive(double arrival);

 private:
  LogicalCosts costs_;
  double now_ = 0.0;
};

}  // namespace llmp
