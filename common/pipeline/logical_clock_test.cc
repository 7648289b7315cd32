// LogicalClock's three rules (logical_clock.h) on hand-worked cases: compute ops take their
// cost, a send carries the end of the op before it, a recv waits for the time its message
// carries (and never moves the clock back). The executor's use of it over real messages is
// tested by every pipeline stage's executed-bubble test (stages/*/…_test.cc).
#include "common/pipeline/logical_clock.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace llmp {
namespace {

TEST(LogicalClock, ComputeOpsTakeThePapersCosts) {
  LogicalClock c;
  const LogicalInterval f = c.compute(Op::kForward);
  EXPECT_EQ(f.start, 0.0);
  EXPECT_EQ(f.end, 1.0);                          // F = 1
  EXPECT_EQ(c.compute(Op::kBackward).end, 3.0);   // B = 2
  EXPECT_EQ(c.compute(Op::kBackwardInput).end, 4.0);   // zero bubble's B = 1
  EXPECT_EQ(c.compute(Op::kBackwardWeight).end, 5.0);  // W = 1
  EXPECT_EQ(c.now(), 5.0);
  EXPECT_THROW(c.compute(Op::kSendForward), std::invalid_argument);
}

TEST(LogicalClock, SendCarriesTheEndOfTheProducingOp) {
  LogicalClock c;
  c.compute(Op::kForward);
  const LogicalInterval s = c.send();
  EXPECT_EQ(s.start, 1.0);
  EXPECT_EQ(s.end, 1.0);  // sends take no logical time
  EXPECT_EQ(c.now(), 1.0);
}

TEST(LogicalClock, ReceiveWaitsForTheMessagesTime) {
  // Rank 1 of GPipe p = 2: its F0 needs rank 0's F0, which ended at 1.
  LogicalClock c;
  const LogicalInterval r = c.receive(1.0);
  EXPECT_EQ(r.start, 0.0);
  EXPECT_EQ(r.end, 1.0);  // idle [0, 1): the bubble
  EXPECT_EQ(c.compute(Op::kForward).start, 1.0);
  // A message that arrived long ago does not move the clock back.
  c.compute(Op::kBackward);  // now 4
  const LogicalInterval late = c.receive(2.0);
  EXPECT_EQ(late.start, 4.0);
  EXPECT_EQ(late.end, 4.0);
  c.reset();
  EXPECT_EQ(c.now(), 0.0);
}

TEST(LogicalClock, CostsCanBeChanged) {
  LogicalCosts costs;
  costs.forward = 2, costs.backward = 4;
  LogicalClock c(costs);
  EXPECT_EQ(c.compute(Op::kForward).end, 2.0);
  EXPECT_EQ(c.compute(Op::kBackward).end, 6.0);
  EXPECT_EQ(costs.of(Op::kRecvBackward), 0.0);
}

}  // namespace
}  // namespace llmp
