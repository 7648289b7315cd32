// The ASCII timeline: rows per rank, labels where the simulator put them, the bubble printed,
// and measured spans scaled to a width.
//
// Glossary: p pipeline stages (rows), m micro-batches, T makespan.
#include "common/pipeline/timeline.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace llmp {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(Timeline, OneFOneBFourStagesEightMicroBatches) {
  const Schedule s = one_f_one_b(4, 8);
  const std::string text = render_timeline(s, simulate(s));
  std::cout << text;
  const auto lines = lines_of(text);
  ASSERT_GE(lines.size(), 7u);
  EXPECT_EQ(lines[0], "1f1b p=4 m=8 v=1: 1 slot = 1 time unit = 3 characters");
  // T = (m+p-1)(F+B) = 22 slots of 3 characters. Rank 0 idles p-1 = 3 slots after warm-up.
  EXPECT_EQ(lines[2], "rank 0 |F0 F1 F2 F3 .........B0 F4 B1 F5 B2 F6 B3 F7 B4 ...B5 ...B6 ...B7 |");
  EXPECT_EQ(lines[5], "rank 3 |.........F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 .........|");
  EXPECT_NE(text.find("bubble fraction 0.2727 = idle / (p · makespan)"), std::string::npos);  // 3/11
}

TEST(Timeline, ZeroBubbleShowsWeightGradients) {
  const Schedule s = zb_h1(2, 2);
  const std::string text = render_timeline(s, simulate(s));
  std::cout << text;
  // Half-cost B and W: 1 slot = 0.5, so a forward takes two slots.
  EXPECT_NE(text.find("rank 1 |......F0    B0 F1    B1 W0 W1 |"), std::string::npos);
}

TEST(Timeline, MeasuredSpansAreScaledToTheWidth) {
  // Two ranks, measured seconds starting at 10.0; sends/recvs are not drawn.
  const std::vector<Span> spans = {
      {0, 10.0, 11.0, "F0", "forward"}, {0, 11.0, 11.5, "sf0", "send"},
      {1, 11.0, 12.0, "F0", "forward"}, {1, 12.0, 13.0, "B0", "backward"},
      {0, 13.0, 14.0, "B0", "backward"}, {0, 14.0, 14.5, "opt", "optimizer"}};
  const auto lines = lines_of(render_spans(spans, 2, 9, "measured"));
  EXPECT_EQ(lines[0], "measured");
  EXPECT_EQ(lines[2], "rank 0 |F0....B0o|");  // "opt" cut to its one character
  EXPECT_EQ(lines[3], "rank 1 |..F0B0...|");
  // Idle over the forward/backward spans: T = 4.5, busy 2 + 2 -> (9 - 4) / 9.
  EXPECT_NEAR(bubble_fraction(spans, 2), 5.0 / 9.0, 1e-12);
  EXPECT_THROW(render_spans(spans, 1, 9), std::invalid_argument);  // rank 1 of 1 rank
  // The wall-clock timeline of oversubscribed ranks names its fraction for what it is.
  const std::string wall = render_spans(spans, 2, 9, "wall clock", "wall-clock idle fraction");
  EXPECT_NE(wall.find("\nwall-clock idle fraction 0.5556 = idle / (p · makespan)\n"),
            std::string::npos);
  EXPECT_EQ(wall.find("bubble fraction"), std::string::npos);
}

TEST(Timeline, BubbleMatchesTheSimulator) {
  for (const Schedule& s : {gpipe(4, 4), interleaved_1f1b(2, 4, 2), zb_h1(4, 8), naive(2, 2)}) {
    const SimResult r = simulate(s);
    EXPECT_NEAR(bubble_fraction(r.compute_spans(), s.p), r.bubble_fraction, 1e-12) << s.name;
  }
}

}  // namespace
}  // namespace llmp
