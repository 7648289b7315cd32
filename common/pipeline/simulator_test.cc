// The dry run against the papers' closed forms, and its error detection.
//
// Asserted formulas (T makespan, bubble_fraction = Σ_r idle_r / (p·T), bubble_ratio =
// Σ_r idle_r / Σ_r busy_r; see simulator.h):
//   GPipe, 1F1B (Huang et al. 2019; Narayanan et al. 2021 §2.2.1), any F, B:
//     T = (m+p-1)(F+B),  bubble_fraction = (p-1)/(m+p-1)
//   Interleaved 1F1B (Narayanan et al. 2021 §2.2.2), F = B, m % p == 0:
//     bubble_ratio = (1/v)·(p-1)/m,  bubble_fraction = (p-1)/(v·m + p-1)
//   ZB-H1 (Qi et al. 2023 §3.1), m >= p: idle per rank (p-1)(F + B - W), against 1F1B's
//     (p-1)(F + B + W) with the same split costs; i.e. T = m(F+B+W) + (p-1)(F+B-W).
//   Peak in-flight micro-batches: GPipe m; 1F1B min(p-r, m) on rank r (rank 0: min(p, m));
//     ZB-H1 min(p, m) on every rank (so its max equals 1F1B's).
//
// Glossary: p pipeline stages, m micro-batches, v model chunks per rank, r rank, F/B/W costs.
#include "common/pipeline/simulator.h"

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

namespace llmp {
namespace {

constexpr double kEps = 1e-12;

TEST(Simulator, GPipeAndOneFOneBBubbleIsPMinus1OverMPlusPMinus1) {
  for (const Costs& c : {Costs{}, Costs{1.0, 2.0, 1.0, 1.0}}) {  // F = B, and B = 2F
    for (int p : {1, 2, 4}) {
      for (int m : {1, 4, 8}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " B=" + std::to_string(c.backward));
        const double expected = double(p - 1) / (m + p - 1);
        for (const Schedule& s : {gpipe(p, m), one_f_one_b(p, m)}) {
          const SimResult r = simulate(s, c);
          EXPECT_NEAR(r.makespan, (m + p - 1) * (c.forward + c.backward), kEps) << s.name;
          EXPECT_NEAR(r.bubble_fraction, expected, kEps) << s.name;
          EXPECT_NEAR(r.bubble_ratio, double(p - 1) / m, kEps) << s.name;
        }
      }
    }
  }
}

TEST(Simulator, NaiveHasOneMicroBatchInThePipe) {
  const SimResult r = simulate(naive(4, 3));
  EXPECT_NEAR(r.bubble_fraction, 3.0 / 4.0, kEps);  // (p-1)/p
  EXPECT_EQ(r.max_peak_in_flight(), 1);
}

TEST(Simulator, InterleavedBubbleIsOneOverVOfOneFOneB) {
  for (int p : {2, 4}) {
    for (int v : {2, 3, 4}) {
      for (int m = p; m <= 8; m += p) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(v));
        const SimResult r = simulate(interleaved_1f1b(p, m, v));
        const double ratio = (1.0 / v) * (p - 1) / m;  // Megatron: bubble time / ideal time
        EXPECT_NEAR(r.bubble_ratio, ratio, kEps);
        EXPECT_NEAR(r.bubble_fraction, double(p - 1) / (v * m + p - 1), kEps);
        EXPECT_NEAR(r.bubble_fraction, ratio / (1 + ratio), kEps);
        EXPECT_LT(r.bubble_fraction, simulate(one_f_one_b(p, m)).bubble_fraction);
        // The price: more activations kept on rank 0 than 1F1B's p micro-batches.
        EXPECT_GT(r.peak_activations(0), std::min(p, m) - kEps);
      }
    }
  }
}

TEST(Simulator, PeakInFlightMicroBatches) {
  for (int p : {1, 2, 4}) {
    for (int m = 1; m <= 8; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const SimResult one = simulate(one_f_one_b(p, m));
      const SimResult gp = simulate(gpipe(p, m));
      const SimResult zb = simulate(zb_h1(p, m));
      EXPECT_EQ(one.peak_in_flight[0], std::min(p, m));
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(one.peak_in_flight[r], std::min(p - r, m));
        EXPECT_LE(one.peak_in_flight[r], p);
        EXPECT_EQ(gp.peak_in_flight[r], m);
        EXPECT_EQ(zb.peak_in_flight[r], std::min(p, m));
      }
      EXPECT_LE(zb.max_peak_in_flight(), one.max_peak_in_flight());
    }
  }
}

TEST(Simulator, ZeroBubbleH1BeatsOneFOneB) {
  // Default costs: F = 1, full B = 1 = B-input 0.5 + W 0.5; and the paper's F = B = W = 1.
  for (const Costs& c : {Costs{}, Costs{1.0, 2.0, 1.0, 1.0}}) {
    const double F = c.forward, B = c.backward_input, W = c.backward_weight;
    for (int p : {2, 4}) {
      for (int m = 1; m <= 8; ++m) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " W=" + std::to_string(W));
        const SimResult zb = simulate(zb_h1(p, m), c);
        const SimResult one = simulate(one_f_one_b(p, m), c);
        EXPECT_LT(zb.bubble_fraction, one.bubble_fraction);
        EXPECT_LE(zb.max_peak_in_flight(), one.max_peak_in_flight());
        for (int r = 0; r < p; ++r) EXPECT_NEAR(zb.busy[r], m * (F + B + W), kEps);
        if (m >= p) {
          EXPECT_NEAR(zb.makespan, m * (F + B + W) + (p - 1) * (F + B - W), kEps);
          EXPECT_NEAR(one.makespan, m * (F + B + W) + (p - 1) * (F + B + W), kEps);
        }
      }
    }
  }
}

TEST(Simulator, EveryGeneratedScheduleRunsToTheEnd) {
  int checked = 0;
  for (const std::string& name : schedule_names()) {
    for (int v : {1, 2, 3}) {
      for (int p : {1, 2, 4}) {
        for (int m = 1; m <= 8; ++m) {
          if (v > 1 && name != "interleaved_1f1b") continue;
          if (v > 1 && m % p != 0) continue;  // interleaved's documented constraint
          if (name == "chimera" && (p % 2 != 0 || m % p != 0)) continue;  // chimera's
          SCOPED_TRACE(name + " p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(v));
          const Schedule s = make_schedule(name, p, m, v);
          const SimResult r = simulate(s);
          for (int q = 0; q < p; ++q) EXPECT_NEAR(r.busy[q], m * 2.0, kEps);  // m·(F+B)
          EXPECT_EQ(r.spans.size(), s.num_actions());
          EXPECT_GE(r.bubble_fraction, 0.0);
          if (p == 1) {
            EXPECT_NEAR(r.bubble_fraction, 0.0, kEps);
          }
          ++checked;
        }
      }
    }
  }
  // v = 1 for the five one-pipeline schedules; v = 2, 3 where m % p == 0; chimera at even p
  // with m % p == 0 (p = 2: m = 2, 4, 6, 8; p = 4: m = 4, 8).
  EXPECT_EQ(checked, 5 * 3 * 8 + 2 * (8 + 4 + 2) + (4 + 2));
}

TEST(Simulator, RecvEndsWhenTheSendHappened) {
  const SimResult r = simulate(one_f_one_b(2, 1));  // rank 1: rf0 F0 B0 sb0
  EXPECT_DOUBLE_EQ(r.start[1][0], 0.0);
  EXPECT_DOUBLE_EQ(r.end[1][0], 1.0);  // waits for rank 0's F0
  EXPECT_DOUBLE_EQ(r.start[1][1], 1.0);
  EXPECT_DOUBLE_EQ(r.end[0].back(), 4.0);  // rank 0's B0 after rank 1's B0
}

// Expects simulate(s) to throw a ScheduleError at (rank, index) whose message contains `what`.
void expect_error(const Schedule& s, int rank, int index, const std::string& what) {
  try {
    simulate(s);
    ADD_FAILURE() << "no error for\n" << to_string(s);
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.rank, rank) << e.what();
    EXPECT_EQ(e.index, index) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Simulator, DetectsDeadlockWhenBothRanksReceiveFirst) {
  Schedule s = empty_schedule("deadlock", 2, 1);
  // Rank 0 waits for the gradient before sending its activations; rank 1 waits for those.
  s.ranks[0] = {{Op::kForward, 0, 0}, {Op::kRecvBackward, 0, 0}, {Op::kSendForward, 0, 0}, {Op::kBackward, 0, 0}};
  s.ranks[1] = {{Op::kRecvForward, 0, 0}, {Op::kForward, 0, 0}, {Op::kBackward, 0, 0}, {Op::kSendBackward, 0, 0}};
  expect_error(s, 0, 1, "deadlock: every rank with actions left waits at a recv; rank 0 waits for rank 1, "
                        "itself blocked at recv_forward(mb=0, chunk=0)");
}

TEST(Simulator, DetectsUnmatchedSendAndRecv) {
  // Wrong micro-batch: rank 0 sends micro-batch 0, rank 1 expects micro-batch 1.
  Schedule s = empty_schedule("mismatch", 2, 2);
  s.ranks[0] = {{Op::kForward, 0, 0}, {Op::kSendForward, 0, 0}};
  s.ranks[1] = {{Op::kRecvForward, 1, 0}, {Op::kForward, 1, 0}};
  expect_error(s, 0, 1, "unmatched send: rank 1 never receives it");
  // A recv whose sender never sends: rank 1 forgets send_backward.
  Schedule t = one_f_one_b(2, 1);
  t.ranks[1].pop_back();
  expect_error(t, 0, 2, "unmatched recv: its sender never sends it");
}

TEST(Simulator, DetectsBrokenDependenciesAndMissingWork) {
  Schedule s = zb_h1(2, 1);  // rank 1: rf0 F0 B0 sb0 W0
  std::swap(s.ranks[1][2], s.ranks[1][4]);
  expect_error(s, 1, 2, "backward_weight (W) before its backward_input (B)");
  Schedule t = one_f_one_b(2, 2);
  t.ranks[0].insert(t.ranks[0].begin(), {Op::kRecvForward, 0, 0});
  expect_error(t, 0, 0, "recv_forward on the first virtual stage");
  Schedule u = gpipe(1, 2);
  u.ranks[0].pop_back();  // B0 missing
  expect_error(u, 0, 3, "missing backward");
  Schedule w = gpipe(1, 1);
  w.ranks[0][0].microbatch = 5;
  expect_error(w, 0, 0, "out of range");
}

}  // namespace
}  // namespace llmp
