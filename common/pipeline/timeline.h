// ASCII pipeline timeline: one row per rank, time on the x axis, the bubble as dots.
//
// The pictures of the papers (GPipe Fig. 2c, Megatron-LM Figs. 3-4, Zero Bubble Figs. 2-3), in a
// terminal. Example, 1F1B with p = 4, m = 8 (1 slot = one forward = 3 characters):
//   rank 0 |F0 F1 F2 F3 .........B0 F4 ...
//   rank 3 |.........F0 B0 F1 B1 ...
// The same renderer draws simulated spans (render_timeline) and executed ones (render_spans with
// the executor's logical or wall-clock start/end times, scaled to a width).
//
// Glossary: p pipeline stages (rows), m micro-batches, v model chunks per rank, F forward,
// B backward (zero bubble: input gradient), W weight gradient, T makespan.
#pragma once

#include <string>
#include <vector>

#include "common/pipeline/schedule.h"
#include "common/pipeline/simulator.h"

namespace llmp {

/// Draws `spans` as rows "rank r |...|", r = 0..num_ranks-1, `width` characters for the time
/// from the earliest start to the latest end (any unit: seconds or simulator slots). A span
/// covers the characters [round(start/dt), round(end/dt)) with dt = T/width (at least one), and
/// shows its label, padded with spaces when longer, cut when shorter. Idle time is '.'. Only
/// spans of category "forward", "backward" and "optimizer" are drawn; sends and recvs count as
/// idle (that is the time a rank waits). Below the rows: a legend and
///   "bubble fraction 0.2727 = idle / (p · makespan)"
/// computed over the forward and backward spans (so 0 means no idle rank-time at all);
/// `fraction_name` replaces "bubble fraction" (the wall-clock timeline of oversubscribed ranks
/// is not a bubble measurement and says so).
/// Throws std::invalid_argument if width < 1, num_ranks < 1, or a span's rank is out of range.
std::string render_spans(const std::vector<Span>& spans, int num_ranks, int width,
                         const std::string& title = "",
                         const std::string& fraction_name = "bubble fraction");

/// The timeline of a simulated schedule: render_spans over sim.spans with a width chosen so that
/// the shortest compute action gets one label plus a space ("F0 ", a unit slot), and a title
/// "1f1b p=4 m=8 v=1, 1 slot = 1 time unit = 3 characters" style.
std::string render_timeline(const Schedule& schedule, const SimResult& sim);

/// Bubble fraction of measured or simulated spans: Σ_r (T - busy_r) / (num_ranks · T), where T
/// is latest end minus earliest start and busy_r the total duration of rank r's forward and
/// backward spans. Equals SimResult::bubble_fraction for the simulator's spans.
double bubble_fraction(const std::vector<Span>& spans, int num_ranks);

}  // namespace llmp
