// What stages/README.md's long-sequence table claims, measured by the table's own code at a small
// size (T = 32, B = 2, p = 2): every method holds fewer attention-score bytes per rank than the
// baseline on whole sequences, ring attention the fewest (no scores kept, two (T/p)² blocks);
// Ulysses sends the fewest bytes; every method sends something and takes time.
//
// Glossary: p ranks, B sequences, T positions.
#include "stages/long_sequences/table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/stage_test_util.h"

namespace llmp {
namespace {

TEST(LongSequenceTable, TheMethodsRankAsTheReadmeSays) {
  const int T = 32, B = 2, p = test_world().size();
  const GPTConfig c = table_model(T);
  const Row base = measure_baseline(c, B, /*timed=*/1);  // on every rank, alone
  double ring_peak = 0, ulysses_sent = 0, least_peak = base.score_peak, least_sent = 1e300;
  int measured = 0;
  for (const Method& me : methods()) {
    ASSERT_EQ(me.split_error(T, c.heads, p), "") << me.label;
    const Row r = measure_method(me, c, B, /*timed=*/1, test_world());
    EXPECT_LT(r.score_peak, base.score_peak) << me.label;
    EXPECT_GT(r.sent, 0) << me.label;
    EXPECT_GT(r.calls, 0) << me.label;
    EXPECT_GT(r.tokens_per_s, 0) << me.label;
    least_peak = std::min(least_peak, r.score_peak);
    least_sent = std::min(least_sent, r.sent);
    if (me.label.rfind("ring attention", 0) == 0) ring_peak = r.score_peak;
    if (me.label == "Ulysses") ulysses_sent = r.sent;
    ++measured;
  }
  EXPECT_EQ(measured, 3);
  EXPECT_EQ(ring_peak, least_peak);
  EXPECT_EQ(ulysses_sent, least_sent);
}

}  // namespace
}  // namespace llmp
