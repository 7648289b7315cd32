// Lab one_f_one_b_schedule: the adapter header. The tests call student_one_f_one_b() and nothing
// else, so you may organise your code (helpers, files) as you like behind this one function.
//
// 1F1B, also called PipeDream-Flush (Narayanan et al. 2021, "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", §2.2.1 and Fig. 3 top), is the pipeline schedule
// Megatron-LM runs by default: the bubble of GPipe (Huang et al. 2019) with the activation memory
// of p micro-batches instead of m. Here it is written as data, a common/pipeline Schedule, which
// the simulator (common/pipeline/simulator.h) checks and times without MPI or a model.
//
// Glossary: p pipeline stages (ranks), r = 0..p-1 a rank, m micro-batches per optimizer step,
// i = 0..m-1 a micro-batch, F forward, B backward, w_r = min(p-r-1, m) rank r's warm-up.
#pragma once

#include "common/pipeline/schedule.h"

namespace llmp {

/// The 1F1B schedule for p pipeline stages and m micro-batches, one model chunk per rank (v = 1).
///
/// Returns a Schedule with p = p, m = m, v = 1 and ranks.size() == p (name: any; not checked).
/// Rank r's actions, in order, in three phases (Narayanan et al. 2021 §2.2.1):
///   1. warm-up: the forwards of micro-batches 0 .. w_r-1, w_r = min(p-r-1, m), just enough to
///      keep the ranks after r busy until the first gradient comes back;
///   2. steady state, for j = 0 .. m-w_r-1: the forward of micro-batch w_r + j, then the backward
///      of micro-batch j (the oldest one still in flight): one forward, one backward;
///   3. cool-down: the backwards of micro-batches m-w_r .. m-1, the ones still in flight.
/// So forwards and backwards both run in micro-batch order 0, 1, ..., m-1; the last rank has no
/// warm-up (F0 B0 F1 B1 ...), and when m <= p-r-1 rank r has no steady state (all F, then all B).
///
/// Every forward and backward comes with its messages, as schedule.h's generators place them
/// (append_forward / append_backward do exactly this):
///   forward of i:  recv_forward(i) (unless r = 0), F(i), send_forward(i) (unless r = p-1);
///   backward of i: recv_backward(i) (unless r = p-1), B(i), send_backward(i) (unless r = 0).
///
/// What the tests assert, with unit costs (F = B = 1, simulate()'s defaults):
///   - simulate() accepts it: no deadlock, no unmatched send or recv, no broken dependency;
///   - every rank runs m forwards and m backwards, each in order 0..m-1, in the three phases above;
///   - bubble_fraction = (p-1)/(m+p-1): the makespan is (m+p-1)(F+B), as for GPipe;
///   - peak_in_flight[r] = min(p-r, m): rank r stores at most p-r micro-batches' activations
///     (GPipe stores m on every rank).
///
/// Errors: p < 1 or m < 1 throws std::invalid_argument whose what() names both values as
/// "p=<p>" and "m=<m>", e.g. "...: needs p >= 1, m >= 1, v >= 1; got p=0, m=4, v=1" (the message
/// of empty_schedule(), which checks exactly this).
Schedule student_one_f_one_b(int p, int m);

}  // namespace llmp
