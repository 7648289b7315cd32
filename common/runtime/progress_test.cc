// Tests for progress formatting and the plain/bar output, written to a temporary file (no TTY).
#include "common/runtime/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace llmp {
namespace {

// Everything written to `f` so far.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

TEST(Progress, FormatDuration) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(12.4), "0:12");
  EXPECT_EQ(format_duration(59.6), "1:00");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3599.4), "59:59");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(100 * 3600 + 5), "100:00:05");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(NAN), "?");
  EXPECT_EQ(format_duration(INFINITY), "?");
}

TEST(Progress, PlainLine) {
  EXPECT_EQ(format_plain_line(10, 200, 4.12341, 12345.4, 12),
            "step 10/200 | loss 4.1234 | 12345 tok/s | eta 0:12");
  EXPECT_EQ(format_plain_line(1, 2, 0.5, NAN, NAN), "step 1/2 | loss 0.5000 | 0 tok/s | eta ?");
}

TEST(Progress, BarLine) {
  EXPECT_EQ(format_bar_line(10, 200, 4.12341, 12345.4, 12, 20),
            "[#-------------------]  10/200 | loss 4.1234 | 12345 tok/s | eta 0:12");
  EXPECT_EQ(format_bar_line(200, 200, 1, 1, 0, 4), "[####] 200/200 | loss 1.0000 | 1 tok/s | eta 0:00");
  EXPECT_EQ(format_bar_line(0, 0, 1, 1, 0, 2), "[##] 0/0 | loss 1.0000 | 1 tok/s | eta 0:00");
}

TEST(Progress, AutoModeOnAFileIsPlain) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(10, 100, 5, Progress::Mode::kAuto, f);
  EXPECT_EQ(p.mode(), Progress::Mode::kPlain);
  std::fclose(f);
}

TEST(Progress, PlainPrintsEveryLogEveryStepsAndTheLast) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    // 4096 tokens per step; step s finishes at s seconds: 4096 tok/s, eta = total - s.
    Progress p(12, 4096, 5, Progress::Mode::kPlain, f);
    for (int s = 1; s <= 12; ++s) p.update(s, 5.0 - 0.25 * s, s);
    p.print("val loss 1.2345");
  }
  EXPECT_EQ(contents(f),
            "step 5/12 | loss 3.7500 | 4096 tok/s | eta 0:07\n"
            "step 10/12 | loss 2.5000 | 4096 tok/s | eta 0:02\n"
            "step 12/12 | loss 2.0000 | 4096 tok/s | eta 0:00\n"
            "val loss 1.2345\n");
  std::fclose(f);
}

TEST(Progress, ResumedRunCountsSpeedFromItsFirstStep) {
  std::FILE* f = std::tmpfile();
  Progress p(200, 1000, 100, Progress::Mode::kPlain, f, /*first_step=*/100);
  p.update(200, 1.0, 10.0);  // 100 steps of 1000 tokens in 10 s
  EXPECT_EQ(contents(f), "step 200/200 | loss 1.0000 | 10000 tok/s | eta 0:00\n");
  std::fclose(f);
}

TEST(Progress, BarRedrawsInPlaceAndPrintDoesNotTearIt) {
  std::FILE* f = std::tmpfile();
  {
    Progress p(4, 10, 1, Progress::Mode::kBar, f);
    p.update(1, 2.0, 1.0);
    p.update(2, 1.5, 1.01);  // within the redraw interval: skipped
    p.print("val loss 1.0");
    p.update(4, 1.0, 4.0);   // the last step always draws
  }                          // destructor ends the line
  const std::string s = contents(f);
  EXPECT_EQ(s,
            "\r[#####---------------] 1/4 | loss 2.0000 | 10 tok/s | eta 0:03\x1b[K"
            "\r\x1b[Kval loss 1.0\n"
            "\r[####################] 4/4 | loss 1.0000 | 10 tok/s | eta 0:00\x1b[K\n");
  std::fclose(f);
}

TEST(Progress, OffPrintsNothing) {
  std::FILE* f = std::tmpfile();
  {
    Progress p(4, 10, 1, Progress::Mode::kOff, f);
    p.update(4, 1.0, 1.0);
    p.print("x");
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(Progress, BadArguments) {
  EXPECT_THROW(Progress(10, 1, 0, Progress::Mode::kOff), std::invalid_argument);
  EXPECT_THROW(Progress(-1, 1, 1, Progress::Mode::kOff), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
