// Schedules as data: the generators produce the papers' orders, the stage arithmetic and tags
// agree between sender and receiver, and bad arguments fail with the values in the message.
//
// Glossary: p pipeline stages, m micro-batches, v model chunks per rank.
#include "common/pipeline/schedule.h"
#include "common/testing/files.h"

#include <set>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace llmp {
namespace {

using testing::error_of;

// Rank r's compute actions as labels, e.g. "F0 F1 B0 F2 B1 B2".
std::string compute_order(const Schedule& s, int r) {
  std::string out;
  for (const Action& a : s.ranks[r]) {
    if (is_compute(a.op)) out += (out.empty() ? "" : " ") + action_label(a, s.v);
  }
  return out;
}

TEST(Schedule, OneFOneBPhasesOnEveryRank) {
  const Schedule s = one_f_one_b(4, 8);
  // Rank r: warm-up of p-r-1 forwards, steady 1F1B, cool-down of p-r-1 backwards.
  EXPECT_EQ(compute_order(s, 0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(compute_order(s, 1), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(compute_order(s, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  // Fewer micro-batches than stages: the warm-up is cut to m.
  EXPECT_EQ(compute_order(one_f_one_b(4, 2), 0), "F0 F1 B0 B1");
}

TEST(Schedule, CommunicationAroundEachCompute) {
  const Schedule s = one_f_one_b(2, 1);
  // Rank 0 (first stage): no recv_forward, no send_backward. Rank 1 (last): no send_forward.
  EXPECT_EQ(to_string(s), "1f1b p=2 m=1 v=1\nrank 0: F0 sf0 rb0 B0\nrank 1: rf0 F0 B0 sb0\n");
}

TEST(Schedule, GPipeAllForwardsThenReversedBackwards) {
  EXPECT_EQ(compute_order(gpipe(2, 3), 0), "F0 F1 F2 B2 B1 B0");
  EXPECT_EQ(compute_order(gpipe(2, 3), 1), "F0 F1 F2 B2 B1 B0");
  EXPECT_EQ(compute_order(naive(3, 2), 1), "F0 B0 F1 B1");
}

TEST(Schedule, InterleavedFollowsMegatronOrder) {
  const Schedule s = interleaved_1f1b(2, 4, 2);
  // Warm-up (p-r-1)·2 + (v-1)·p = 4 chunk-forwards on rank 0, 2 on rank 1; micro-batches
  // go through the chunks p at a time; backwards visit the chunks in reverse.
  EXPECT_EQ(compute_order(s, 0), "F0 F1 f0 f1 F2 b0 F3 b1 f2 B0 f3 B1 b2 b3 B2 B3");
  EXPECT_EQ(compute_order(s, 1), "F0 F1 f0 b0 f1 b1 F2 B0 F3 B1 f2 b2 f3 b3 B2 B3");
  // m == p: everything is warm-up (all forwards, then all backwards).
  EXPECT_EQ(compute_order(interleaved_1f1b(2, 2, 2), 1), "F0 F1 f0 f1 b0 b1 B0 B1");
  // v = 1 is plain 1F1B.
  EXPECT_EQ(interleaved_1f1b(4, 6, 1).ranks, one_f_one_b(4, 6).ranks);
  // v > 2 labels carry the chunk.
  EXPECT_EQ(compute_order(interleaved_1f1b(1, 1, 3), 0), "F0.0 f0.1 F0.2 B0.2 b0.1 B0.0");
}

TEST(Schedule, ZeroBubbleDefersRankWs) {
  const Schedule s = zb_h1(4, 6);
  // Rank 0 defers no W; rank 3 (last) defers 3, then runs F B W; leftovers fill the drain.
  EXPECT_EQ(compute_order(s, 0), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
  EXPECT_EQ(compute_order(s, 3), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5");
}

TEST(Schedule, VirtualStagesAndPeers) {
  Schedule s = empty_schedule("x", 4, 8, 2);
  EXPECT_EQ(s.virtual_stage(1, 1), 5);
  EXPECT_EQ(s.stage_of(5).rank, 1);
  EXPECT_EQ(s.stage_of(5).chunk, 1);
  // The last rank's chunk 0 (stage 3) feeds rank 0's chunk 1 (stage 4).
  const StageRef next = s.peer(3, {Op::kSendForward, 0, 0});
  EXPECT_EQ(next.rank, 0);
  EXPECT_EQ(next.chunk, 1);
  const StageRef prev = s.peer(0, {Op::kRecvForward, 0, 1});
  EXPECT_EQ(prev.rank, 3);
  EXPECT_EQ(prev.chunk, 0);
  EXPECT_NE(error_of([&] { s.peer(0, {Op::kRecvForward, 0, 0}); }), "");  // stage 0 has no prev
  EXPECT_NE(error_of([&] { s.peer(0, {Op::kForward, 0, 0}); }), "");
}

TEST(Schedule, SenderAndReceiverComputeTheSameTag) {
  const Schedule s = interleaved_1f1b(4, 8, 2);
  std::set<std::pair<int, int>> sent, received;  // (receiving rank, tag)
  for (int r = 0; r < s.p; ++r) {
    for (const Action& a : s.ranks[r]) {
      if (a.op == Op::kSendForward || a.op == Op::kSendBackward) {
        EXPECT_TRUE(sent.insert({s.peer(r, a).rank, s.message_tag(r, a)}).second);
      } else if (a.op == Op::kRecvForward || a.op == Op::kRecvBackward) {
        const int t = s.message_tag(r, a);
        EXPECT_GE(t, 0);
        EXPECT_LT(t, 2 * s.p * s.v * s.m);
        EXPECT_TRUE(received.insert({r, t}).second);
      }
    }
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(sent.size(), 2u * s.m * (s.p * s.v - 1));  // every stage boundary, both directions
}

TEST(Schedule, ErrorsNameTheValues) {
  EXPECT_EQ(error_of([] { interleaved_1f1b(4, 6, 2); }),
            "number of micro-batches m=6 is not divisible by pipeline stages p=4; "
            "interleaved_1f1b needs m % p == 0");
  EXPECT_EQ(error_of([] { gpipe(0, 4); }), "gpipe: needs p >= 1, m >= 1, v >= 1; got p=0, m=4, v=1");
  EXPECT_EQ(error_of([] { one_f_one_b(2, 0); }), "1f1b: needs p >= 1, m >= 1, v >= 1; got p=2, m=0, v=1");
  EXPECT_EQ(error_of([] { make_schedule("gpipe", 2, 4, 2); }),
            "schedule gpipe runs one model chunk per rank; got v=2 (use interleaved_1f1b for v > 1)");
  EXPECT_EQ(error_of([] { make_schedule("pipedream", 2, 4); }),
            "unknown pipeline schedule 'pipedream'; known: naive, gpipe, 1f1b, interleaved_1f1b, zb_h1, "
            "chimera");
  EXPECT_EQ(error_of([] { check_layers_divisible(6, 2, 2); }), "layers 6 not divisible by p·v = 4 (p=2, v=2)");
  EXPECT_EQ(error_of([] { check_layers_divisible(8, 2, 2); }), "");
}

TEST(Schedule, MakeScheduleByName) {
  for (const std::string& name : schedule_names()) {
    const Schedule s = make_schedule(name, 2, 4);
    EXPECT_EQ(s.name, name);
    EXPECT_EQ(s.ranks.size(), 2u);
  }
  EXPECT_EQ(make_schedule("interleaved_1f1b", 2, 4, 2).v, 2);
}

TEST(Schedule, LayerRangesCoverTheModelInStageOrder) {
  // 8 layers, p = 2, v = 2: stages 0..3 hold layers [0,2) [2,4) [4,6) [6,8).
  EXPECT_EQ(layer_range(8, 2, 2, 0, 0).first, 0);
  EXPECT_EQ(layer_range(8, 2, 2, 1, 0).first, 2);
  EXPECT_EQ(layer_range(8, 2, 2, 0, 1).first, 4);
  EXPECT_EQ(layer_range(8, 2, 2, 1, 1).last, 8);
  EXPECT_NE(error_of([] { layer_range(8, 2, 2, 2, 0); }), "");
}

TEST(Schedule, LabelsAndSpans) {
  EXPECT_EQ(action_label({Op::kBackwardWeight, 3, 0}, 1), "W3");
  EXPECT_EQ(action_label({Op::kForward, 3, 1}, 2), "f3");
  EXPECT_EQ(action_label({Op::kRecvForward, 3, 1}, 2), "rf3.1");
  EXPECT_EQ(to_string(Action{Op::kSendBackward, 2, 0}), "send_backward(mb=2, chunk=0)");
  const Span sp = make_span(2, {Op::kBackwardInput, 5, 0}, 1, 1.5, 2.0);
  EXPECT_EQ(sp.label, "B5");
  EXPECT_EQ(sp.category, "backward");
  EXPECT_EQ(sp.rank, 2);
  EXPECT_STREQ(op_category(Op::kRecvBackward), "recv");
}

}  // namespace
}  // namespace llmp
