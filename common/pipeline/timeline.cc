// ASCII timeline: spans -> rows of characters. See timeline.h for the picture.
//
// Glossary: p pipeline stages (rows), T makespan, dt time per character.
#include "common/pipeline/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace llmp {

namespace {

bool is_drawn(const Span& s) {
  return s.category == "forward" || s.category == "backward" || s.category == "optimizer";
}
bool is_work(const Span& s) { return s.category == "forward" || s.category == "backward"; }

// Earliest start and latest end over all spans.
std::pair<double, double> extent(const std::vector<Span>& spans) {
  if (spans.empty()) return {0.0, 0.0};
  double t0 = spans[0].start, t1 = spans[0].end;
  for (const Span& s : spans) t0 = std::min(t0, s.start), t1 = std::max(t1, s.end);
  return {t0, t1};
}

// "1", "2.5", "0.125": a time for the ruler, as short as it goes.
std::string short_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", x);
  return buf;
}

// The ruler: a tick '|' with its time every `step` units, ticks at least 6 characters apart.
std::string ruler(double t0, double t1, int width, const std::string& margin) {
  const double dt = (t1 - t0) / width;
  double step = 1e-9;
  for (double base = 1e-9; base < 1e12; base *= 10) {  // the first 1, 2, 5 x 10^k wide enough
    for (double k : {1.0, 2.0, 5.0}) {
      if (step == 1e-9 && k * base / dt >= 6.0) step = k * base;
    }
  }
  std::string line(width + 1, ' ');
  for (int i = 0; t0 + i * step <= t1 + 1e-9 * step; ++i) {
    const int c = static_cast<int>(std::lround(i * step / dt));
    const std::string label = "|" + short_number(i * step);
    if (c + label.size() > line.size()) break;  // no room for the whole tick label
    for (size_t j = 0; j < label.size(); ++j) line[c + j] = label[j];
  }
  return margin + line;
}

}  // namespace

double bubble_fraction(const std::vector<Span>& spans, int num_ranks) {
  const auto [t0, t1] = extent(spans);
  if (num_ranks < 1 || t1 <= t0) return 0.0;
  double busy = 0.0;
  for (const Span& s : spans) busy += is_work(s) ? s.end - s.start : 0.0;
  return (num_ranks * (t1 - t0) - busy) / (num_ranks * (t1 - t0));
}

std::string render_spans(const std::vector<Span>& spans, int num_ranks, int width,
                         const std::string& title, const std::string& fraction_name) {
  if (width < 1 || num_ranks < 1) {
    throw std::invalid_argument("render_spans: width " + std::to_string(width) + " and ranks " +
                                std::to_string(num_ranks) + " must be >= 1");
  }
  const auto [t0, t1] = extent(spans);
  const double dt = t1 > t0 ? (t1 - t0) / width : 1.0;
  std::vector<std::string> rows(num_ranks, std::string(width, '.'));
  for (const Span& s : spans) {
    if (s.rank < 0 || s.rank >= num_ranks) {
      throw std::invalid_argument("render_spans: span '" + s.label + "' on rank " +
                                  std::to_string(s.rank) + " of " + std::to_string(num_ranks));
    }
    if (!is_drawn(s)) continue;
    const int c0 = std::clamp(static_cast<int>(std::lround((s.start - t0) / dt)), 0, width - 1);
    const int c1 = std::clamp(static_cast<int>(std::lround((s.end - t0) / dt)), c0 + 1, width);
    for (int c = c0; c < c1; ++c) {
      const size_t j = static_cast<size_t>(c - c0);
      rows[s.rank][c] = j < s.label.size() ? s.label[j] : ' ';
    }
  }
  std::ostringstream os;
  if (!title.empty()) os << title << "\n";
  const std::string margin = "       ";  // as wide as "rank 0 "
  os << ruler(t0, t1, width, margin) << "\n";
  for (int r = 0; r < num_ranks; ++r) {
    char name[24];  // "rank " and any int: no truncation (GCC's -Wformat-truncation)
    std::snprintf(name, sizeof(name), "rank %-2d", r);
    os << name << "|" << rows[r] << "|\n";
  }
  os << "legend: F3 forward of micro-batch 3, B3 its backward (zero bubble: input gradient), "
        "W3 its weight gradient;\n        lower case: odd model chunk (interleaved; Chimera: the up pipeline), .c suffix: "
        "chunk c (v > 2); '.' idle\n";
  char line[48];
  std::snprintf(line, sizeof(line), " %.4f = idle / (p · makespan)\n",
                bubble_fraction(spans, num_ranks));
  os << fraction_name << line;
  return os.str();
}

std::string render_timeline(const Schedule& schedule, const SimResult& sim) {
  const std::vector<Span> spans = sim.compute_spans();
  double slot = 0.0;  // the shortest compute action
  size_t label = 1;   // the longest label
  for (const Span& s : spans) {
    if (s.end > s.start && (slot == 0.0 || s.end - s.start < slot)) slot = s.end - s.start;
    label = std::max(label, s.label.size());
  }
  const int cell = static_cast<int>(label) + 1;
  const int width = slot > 0 ? static_cast<int>(std::ceil(sim.makespan / slot * cell - 1e-9)) : 1;
  std::ostringstream title;
  title << schedule.name << " p=" << schedule.p << " m=" << schedule.m << " v=" << schedule.v
        << ": 1 slot = " << short_number(slot) << " time unit = " << cell << " characters";
  return render_spans(spans, schedule.p, std::max(width, 1), title.str());
}

}  // namespace llmp
