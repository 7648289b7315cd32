// Dry run of a pipeline schedule: checks it and times it, without MPI or a model.
//
// Every rank walks its action list with its own clock. A compute action (F, B, W) advances the
// clock by its cost; a send posts its message at the current time and costs nothing (buffered,
// like isend); a recv waits until the matching send has been posted: clock = max(clock, time of
// the send). A rank that reaches a recv whose send has not happened yet is blocked; when every
// rank with actions left is blocked, the schedule deadlocks.
//
// Costs are per micro-batch through ALL of a rank's layers; a chunk action of an interleaved
// schedule costs 1/v of it (each chunk holds 1/v of the rank's layers). Chimera's two chunks
// are whole stages of two pipelines and a micro-batch passes one of them: its chunk actions
// cost a whole op (the divisor is Placement::chunks_per_microbatch(), v / pipelines). So the ideal (bubble-free)
// busy time of every rank is m·(F + B) for any schedule and any v, and schedules compare directly.
//
// Papers: as in schedule.h (GPipe, Megatron-LM §2.2, Zero Bubble §3).
//
// Glossary: p pipeline stages, m micro-batches, v model chunks per rank, F/B/W the costs of a
// forward, a full backward, and the two halves of the zero-bubble backward.
//
// Bubble, precisely. makespan T = the time the last action of any rank ends (all ranks start at
// 0). busy_r = the sum of rank r's compute costs (= m·(F+B) for a complete schedule). Then
//   bubble_fraction = Σ_r (T - busy_r) / (p·T)     the share of all rank-time spent idle;
//   bubble_ratio    = Σ_r (T - busy_r) / Σ_r busy_r   idle time over ideal time (Megatron's
//                                                      "bubble time / ideal time").
// For GPipe and 1F1B, T = (m+p-1)(F+B), so bubble_fraction = (p-1)/(m+p-1) and
// bubble_ratio = (p-1)/m. Interleaved: bubble_ratio = (1/v)(p-1)/m, and
// bubble_fraction = (p-1)/(v·m + p-1) = ratio/(1+ratio).
//
// Activation memory: a (micro-batch, chunk) is in flight on a rank from the start of its forward
// until its activations are freed: the end of its full backward B, or, for zero bubble, the end
// of its W (W still reads the stored layer inputs). peak_in_flight counts those pairs;
// peak_activations divides by v (a chunk stores 1/v of a rank's activations), in units of one
// micro-batch's activations for the rank's layers.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "common/pipeline/schedule.h"

namespace llmp {

/// Cost of each compute op, for one micro-batch through all of a rank's layers (arbitrary unit;
/// the timeline calls it a slot). Defaults: unit forward and unit backward, as in the papers'
/// "F = B" bubble formulas; a zero-bubble backward splits the unit backward into two halves.
/// Sends and recvs cost 0 (communication is free in the dry run).
struct Costs {
  double forward = 1.0;          ///< F
  double backward = 1.0;         ///< B, full backward (input + weight gradients)
  double backward_input = 0.5;   ///< B of zero bubble (input gradient)
  double backward_weight = 0.5;  ///< W of zero bubble (weight gradient)

  /// Cost of op `op` for one chunk of a rank holding v chunks: the op's cost / v; 0 for sends
  /// and recvs.
  double of(Op op, int v) const;
};

/// A schedule the simulator rejects: a malformed action, an unmatched send or recv, or a
/// deadlock. `what()` is one line naming the first offending action, e.g. "deadlock: rank 0
/// blocked at action 0 recv_forward(mb=0, chunk=0) ...".
class ScheduleError : public std::invalid_argument {
 public:
  ScheduleError(const std::string& msg, int rank, int index, Action action)
      : std::invalid_argument(msg), rank(rank), index(index), action(action) {}
  int rank;       ///< rank of the offending action
  int index;      ///< its position in schedule.ranks[rank]
  Action action;  ///< the action itself
};

/// Timing and memory of one simulated optimizer step.
struct SimResult {
  int p = 1, m = 1;
  int v = 1;  ///< chunks one micro-batch passes per rank (Placement::chunks_per_microbatch())
  double makespan = 0.0;                  ///< T: when the last action ends
  std::vector<double> busy;               ///< [rank] compute time
  double bubble_fraction = 0.0;           ///< Σ_r (T - busy_r) / (p·T)
  double bubble_ratio = 0.0;              ///< Σ_r (T - busy_r) / Σ_r busy_r
  std::vector<std::vector<double>> start;  ///< [rank][i]: start of schedule.ranks[rank][i]
  std::vector<std::vector<double>> end;    ///< [rank][i]: end (a recv ends when it is satisfied)
  std::vector<int> peak_in_flight;         ///< [rank] max (micro-batch, chunk) pairs in flight
  std::vector<Span> spans;                 ///< every action as a span (recv spans show waiting)

  /// max over ranks of peak_in_flight.
  int max_peak_in_flight() const;
  /// peak_in_flight[rank] / v: in micro-batches' worth of the rank's activations.
  double peak_activations(int rank) const;
  /// The compute spans only (F, B, W): what the ASCII timeline draws.
  std::vector<Span> compute_spans() const;
};

/// Checks `s` and replays it with `costs`. Throws ScheduleError for the first problem found:
///  - a micro-batch or chunk out of range, or a send/recv the stage cannot have (recv_forward on
///    virtual stage 0, send_forward on the last one, ...);
///  - a dependency broken inside a rank: F of a non-first stage before its recv_forward, B before
///    its F, B of a non-last stage before its recv_backward, W before its B, a send before the
///    compute that produces it; or a compute op repeated or missing (every (micro-batch, chunk)
///    needs one F and one B, or one B-input and one W, on every rank);
///  - an unmatched send or recv: no action on the peer rank takes the other end;
///  - a deadlock: every rank with actions left waits at a recv.
SimResult simulate(const Schedule& s, const Costs& costs = Costs{});

}  // namespace llmp
