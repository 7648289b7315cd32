// Lab one_f_one_b_schedule: the tests. They reach the code only through one_f_one_b_schedule.h,
// so this one file checks both the reference (reference_test, in CI) and your starter.cc
// (student_test: bazel test //labs/one_f_one_b_schedule:student_test).
//
// Every test runs p in {1, 2, 4} and m in {1, 2, 4, 8} (m below, at and above p) and reports all
// the (p, m) it fails at once, with the details and the timeline of one (render_timeline; the
// action lists when the schedule does not simulate). What is checked, and why it holds:
//  - simulate() accepts the schedule: no deadlock, no unmatched send or recv, no broken
//    dependency (the simulator's message names the rank and the action);
//  - every rank runs m forwards and m backwards, each in micro-batch order 0..m-1;
//  - the phases: rank r runs w_r = min(p-r-1, m) warm-up forwards, then F B pairs, then the
//    cool-down backwards. Counted as the forwards before the first backward: w_r, plus the
//    steady state's opening forward when there is a steady state (m > w_r), i.e. min(p-r, m);
//  - bubble_fraction = (p-1)/(m+p-1) with F = B = 1: the pipe fills for p-1 slots and drains for
//    p-1, so the makespan is (m+p-1)(F+B) while each rank is busy m(F+B);
//  - peak_in_flight[r] = min(p-r, m): the warm-up's w_r micro-batches plus the one forward of
//    each steady F B pair (GPipe, the starter, holds all m);
//  - p < 1 or m < 1 throws std::invalid_argument naming both values.
//
// Glossary: p pipeline stages, r rank, m micro-batches, w_r warm-up forwards, F forward,
// B backward.
#include "labs/one_f_one_b_schedule/one_f_one_b_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/pipeline/simulator.h"
#include "common/pipeline/timeline.h"

namespace llmp {
namespace {

struct Case {
  int p, m;
};
const std::vector<Case> kCases = [] {
  std::vector<Case> cases;
  for (int p : {1, 2, 4})
    for (int m : {1, 2, 4, 8}) cases.push_back({p, m});
  return cases;
}();

// The student's schedule for (p, m) and its simulation; `error` is "" when simulate() accepted it.
struct Built {
  Schedule s;
  SimResult sim;
  std::string error;
};

Built build(int p, int m) {
  Built b;
  try {
    b.s = student_one_f_one_b(p, m);
  } catch (const std::exception& e) {
    b.error = std::string("student_one_f_one_b threw: ") + e.what();
    return b;
  }
  if (b.s.p != p || b.s.m != m || b.s.v != 1 || static_cast<int>(b.s.ranks.size()) != p) {
    std::ostringstream os;
    os << "the schedule has p=" << b.s.p << ", m=" << b.s.m << ", v=" << b.s.v << " and "
       << b.s.ranks.size() << " rank lists; want p=" << p << ", m=" << m << ", v=1 and " << p;
    b.error = os.str();
    return b;
  }
  try {
    b.sim = simulate(b.s);  // unit costs: F = B = 1
  } catch (const std::invalid_argument& e) {  // ScheduleError too
    b.error = std::string("simulate() rejects it: ") + e.what();
  }
  return b;
}

// What the student built: the timeline when it simulates, else each rank's actions.
std::string picture(const Built& b) {
  if (b.error.empty()) return "your schedule:\n" + render_timeline(b.s, b.sim);
  return "your schedule's actions (it does not simulate, so no timeline):\n" + to_string(b.s);
}

// Rank r's compute actions as labels, "F0 F1 B0 ..." (sends and recvs left out).
std::string compute_labels(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions)
    if (is_compute(a.op)) out += (out.empty() ? "" : " ") + action_label(a, 1);
  return out;
}

// The spec's compute order on rank r: F0..F(w-1), then F(w+j) B(j), then B(m-w)..B(m-1).
std::string want_labels(int p, int m, int r) {
  const int w = std::min(p - r - 1, m);
  std::vector<std::string> l;
  for (int i = 0; i < w; ++i) l.push_back("F" + std::to_string(i));
  for (int j = 0; j < m - w; ++j) {
    l.push_back("F" + std::to_string(w + j));
    l.push_back("B" + std::to_string(j));
  }
  for (int i = m - w; i < m; ++i) l.push_back("B" + std::to_string(i));
  std::string out;
  for (const std::string& s : l) out += (out.empty() ? "" : " ") + s;
  return out;
}

// One property over every case: lists the (p, m) that fail it, and shows one in detail, the
// reason and the picture of what was built: the first with p > 1 (one stage sends no messages,
// so its picture shows little), else the first.
class Report {
 public:
  void fail(const Built& b, int p, int m, const std::string& why) {
    failed_ += (failed_.empty() ? "" : ", ") + std::string("(") + std::to_string(p) + ", " +
               std::to_string(m) + ")";
    if (shown_.empty() || (shown_p_ == 1 && p > 1)) {
      shown_ = "in detail, p = " + std::to_string(p) + ", m = " + std::to_string(m) + ":\n" +
               why + "\n" + picture(b);
      shown_p_ = p;
    }
  }
  bool ok() const { return failed_.empty(); }
  std::string str() const { return "wrong for (p, m) = " + failed_ + "\n" + shown_; }

 private:
  std::string failed_, shown_;
  int shown_p_ = 0;
};

TEST(OneFOneBSchedule, SimulatesWithoutDeadlockOrUnmatchedMessages) {
  Report report;
  for (const Case& c : kCases) {
    const Built b = build(c.p, c.m);
    if (!b.error.empty()) report.fail(b, c.p, c.m, b.error);
  }
  if (!report.ok())
    ADD_FAILURE() << "simulate() must accept the schedule (README.md, \"What a wrong schedule "
                     "looks like\"); "
                  << report.str();
}

TEST(OneFOneBSchedule, EveryRankRunsMForwardsAndMBackwardsInMicroBatchOrder) {
  Report report;
  for (const Case& c : kCases) {
    const Built b = build(c.p, c.m);  // needs only the actions, not the simulation
    if (static_cast<int>(b.s.ranks.size()) != c.p) {
      report.fail(b, c.p, c.m, b.error.empty() ? "wrong number of ranks" : b.error);
      continue;
    }
    std::vector<int> in_order(c.m);
    for (int i = 0; i < c.m; ++i) in_order[i] = i;
    std::ostringstream why;
    for (int r = 0; r < c.p; ++r) {
      std::vector<int> f, bw;
      for (const Action& a : b.s.ranks[r]) {
        if (a.op == Op::kForward) f.push_back(a.microbatch);
        if (a.op == Op::kBackward) bw.push_back(a.microbatch);
      }
      if (f != in_order || bw != in_order)
        why << "  rank " << r << " runs " << compute_labels(b.s.ranks[r]) << "\n    want the "
            << c.m << " forwards F0..F" << c.m - 1 << " and the " << c.m << " backwards B0..B"
            << c.m - 1 << ", each in this order\n";
    }
    if (!why.str().empty()) report.fail(b, c.p, c.m, why.str());
  }
  if (!report.ok())
    ADD_FAILURE() << "every rank runs F0..F(m-1) and B0..B(m-1), in micro-batch order; "
                  << report.str();
}

TEST(OneFOneBSchedule, WarmUpThenOneForwardOneBackwardThenCoolDown) {
  Report report;
  for (const Case& c : kCases) {
    const Built b = build(c.p, c.m);
    if (static_cast<int>(b.s.ranks.size()) != c.p) {
      report.fail(b, c.p, c.m, b.error.empty() ? "wrong number of ranks" : b.error);
      continue;
    }
    std::ostringstream why;
    for (int r = 0; r < c.p; ++r) {
      const int w = std::min(c.p - r - 1, c.m);
      const int want_before = w + (c.m > w ? 1 : 0);  // = min(p-r, m)
      int before = 0;
      for (const Action& a : b.s.ranks[r]) {
        if (a.op == Op::kBackward) break;
        before += a.op == Op::kForward;
      }
      const std::string got = compute_labels(b.s.ranks[r]), want = want_labels(c.p, c.m, r);
      if (before == want_before && got == want) continue;
      why << "  rank " << r << ", warm-up min(p-r-1, m) = " << w << ":\n    got  " << got
          << "\n    want " << want << "\n";
      if (before != want_before)
        why << "    " << before << " forwards before the first backward, want " << want_before
            << (c.m > w ? " (the warm-up, then the steady state's first forward)"
                        : " (the warm-up; no steady state as m <= p-r-1)")
            << "\n";
    }
    if (!why.str().empty()) report.fail(b, c.p, c.m, why.str());
  }
  if (!report.ok())
    ADD_FAILURE() << "rank r: warm-up of min(p-r-1, m) forwards, steady state F B, cool-down "
                     "of backwards; "
                  << report.str();
}

TEST(OneFOneBSchedule, BubbleFractionIsPMinusOneOverMPlusPMinusOne) {
  Report report;
  for (const Case& c : kCases) {
    const Built b = build(c.p, c.m);
    if (!b.error.empty()) {
      report.fail(b, c.p, c.m, b.error);
      continue;
    }
    const double want = (c.p - 1.0) / (c.m + c.p - 1.0);
    if (std::fabs(b.sim.bubble_fraction - want) > 1e-12) {
      std::ostringstream why;
      why << "  bubble fraction " << b.sim.bubble_fraction << ", want (p-1)/(m+p-1) = " << want
          << " (makespan " << b.sim.makespan << ", want (m+p-1)(F+B) = " << 2 * (c.m + c.p - 1)
          << ")\n";
      report.fail(b, c.p, c.m, why.str());
    }
  }
  if (!report.ok())
    ADD_FAILURE() << "with F = B = 1 the bubble is (p-1)/(m+p-1) of the step, as for GPipe; "
                  << report.str();
}

TEST(OneFOneBSchedule, PeakInFlightOnRankRIsMinOfPMinusRAndM) {
  Report report;
  for (const Case& c : kCases) {
    const Built b = build(c.p, c.m);
    if (!b.error.empty()) {
      report.fail(b, c.p, c.m, b.error);
      continue;
    }
    std::ostringstream why;
    for (int r = 0; r < c.p; ++r) {
      const int want = std::min(c.p - r, c.m);
      if (b.sim.peak_in_flight[r] != want)
        why << "  rank " << r << " holds up to " << b.sim.peak_in_flight[r]
            << " micro-batches' activations, want min(p-r, m) = " << want << "\n";
    }
    if (!why.str().empty()) report.fail(b, c.p, c.m, why.str());
  }
  if (!report.ok())
    ADD_FAILURE() << "rank r must never hold more than min(p-r, m) micro-batches (GPipe holds "
                     "m); "
                  << report.str();
}

TEST(OneFOneBSchedule, RejectsPOrMBelowOne) {
  for (const Case& c : std::vector<Case>{{0, 4}, {-1, 4}, {4, 0}, {2, -3}, {0, 0}}) {
    const std::string p = "p=" + std::to_string(c.p), m = "m=" + std::to_string(c.m);
    try {
      student_one_f_one_b(c.p, c.m);
      ADD_FAILURE() << "student_one_f_one_b(" << c.p << ", " << c.m
                    << ") returned; want std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find(p) != std::string::npos && what.find(m) != std::string::npos)
          << "student_one_f_one_b(" << c.p << ", " << c.m << ") threw \"" << what
          << "\"; the message must name both values, \"" << p << "\" and \"" << m << "\"";
    }
  }
}

}  // namespace
}  // namespace llmp
