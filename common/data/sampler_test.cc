// Tests for the counter-based sampler: determinism, world-size independence of the global batch,
// targets = tokens shifted by one, split boundaries, and the divisibility error.
#include "common/data/sampler.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmp {
namespace {

// A split whose byte at position p is p mod 251 (a prime), so a window's first byte tells
// where it started and any shift or stray byte shows.
Corpus::Split ramp_split(int64_t len, SplitKind kind = SplitKind::kTrain) {
  Corpus::Split s;
  s.kind = kind;
  for (int64_t p = 0; p < len; ++p) s.bytes.push_back(static_cast<uint8_t>(p % 251));
  return s;
}

struct Batch {
  std::vector<int32_t> x, y;
};

Batch draw(const Corpus::Split& s, uint64_t seed, int64_t step, int first, int n, int T) {
  Batch b{std::vector<int32_t>(n * T), std::vector<int32_t>(n * T)};
  sample(s, seed, step, first, n, T, b.x.data(), b.y.data());
  return b;
}

TEST(Sampler, SameInputsSameBatchOtherSeedOrStepOtherBatch) {
  const Corpus::Split s = ramp_split(100000);
  const Batch a = draw(s, 1337, 5, 0, 16, 32), b = draw(s, 1337, 5, 0, 16, 32);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  EXPECT_NE(a.x, draw(s, 1338, 5, 0, 16, 32).x);
  EXPECT_NE(a.x, draw(s, 1337, 6, 0, 16, 32).x);
}

TEST(Sampler, SlicesOfAnyWorldSizeConcatenateToTheGlobalBatch) {
  const Corpus::Split s = ramp_split(50000);
  const int B = 16, T = 24;
  for (int64_t step : {0, 1, 199}) {
    const Batch global = draw(s, 42, step, 0, B, T);
    for (int world : {1, 2, 4, 8, 16}) {
      std::vector<int32_t> x, y;
      for (int r = 0; r < world; ++r) {
        const BatchSlice sl = rank_slice(B, r, world);
        EXPECT_EQ(sl.first_seq, r * B / world);
        const Batch part = draw(s, 42, step, sl.first_seq, sl.num_seqs, T);
        x.insert(x.end(), part.x.begin(), part.x.end());
        y.insert(y.end(), part.y.begin(), part.y.end());
      }
      EXPECT_EQ(x, global.x) << "world " << world << " step " << step;
      EXPECT_EQ(y, global.y) << "world " << world << " step " << step;
    }
  }
}

TEST(Sampler, RowsAreContiguousWindowsAndTargetsAreShiftedByOne) {
  const Corpus::Split s = ramp_split(10000);
  const int B = 8, T = 16;
  const Batch b = draw(s, 7, 3, 0, B, T);
  for (int j = 0; j < B; ++j) {
    const int64_t o = sequence_offset(7, 3, j, s.size(), T);
    for (int t = 0; t < T; ++t) {
      ASSERT_EQ(b.x[j * T + t], s.bytes[o + t]) << "seq " << j << " t " << t;
      ASSERT_EQ(b.y[j * T + t], s.bytes[o + t + 1]) << "seq " << j << " t " << t;
      if (t + 1 < T) {
        ASSERT_EQ(b.y[j * T + t], b.x[j * T + t + 1]);
      }
    }
  }
  // Distinct sequences of one step start at distinct offsets (with overwhelming probability).
  std::set<int64_t> starts;
  for (int j = 0; j < B; ++j) starts.insert(sequence_offset(7, 3, j, s.size(), T));
  EXPECT_EQ(starts.size(), static_cast<size_t>(B));
}

TEST(Sampler, EveryWindowOfTheSplitAndNothingBeyondIt) {
  // len = T + 4: exactly four windows (offsets 0..3); the last target is the split's last byte.
  const int T = 8;
  const int64_t len = T + 4;
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 200; ++step)
    for (int i = 0; i < 4; ++i) {
      const int64_t o = sequence_offset(99, step, i, len, T);
      ASSERT_GE(o, 0);
      ASSERT_LE(o + T, len - 1) << "target would read past the split";
      seen.insert(o);
    }
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2, 3}));
  // The shortest legal split (T+1 bytes) has exactly one window.
  const Corpus::Split tiny = ramp_split(T + 1);
  const Batch b = draw(tiny, 1, 0, 0, 3, T);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(b.y[j * T + T - 1], tiny.bytes[T]);
}

TEST(Sampler, TrainAndValidationDrawOnlyFromTheirOwnBytes) {
  // A corpus of 900 'a' then 100 'b': the 90/10 boundary falls exactly between them.
  Corpus::Split train, val;
  train.bytes.assign(900, 'a');
  val.kind = SplitKind::kVal;
  val.bytes.assign(100, 'b');
  for (int64_t step = 0; step < 50; ++step) {
    const Batch t = draw(train, 5, step, 0, 4, 32), v = draw(val, 5, step, 0, 4, 32);
    for (int32_t x : t.x) ASSERT_EQ(x, 'a');
    for (int32_t x : t.y) ASSERT_EQ(x, 'a');
    for (int32_t x : v.x) ASSERT_EQ(x, 'b');
    for (int32_t x : v.y) ASSERT_EQ(x, 'b');
  }
}

TEST(Sampler, NullTargetsFillsOnlyTokens) {
  const Corpus::Split s = ramp_split(1000);
  std::vector<int32_t> x(2 * 8);
  sample(s, 3, 0, 0, 2, 8, x.data(), nullptr);
  EXPECT_EQ(x, draw(s, 3, 0, 0, 2, 8).x);
}

TEST(Sampler, Errors) {
  const Corpus::Split s = ramp_split(8);
  std::vector<int32_t> x(64), y(64);
  EXPECT_THROW(sample(s, 0, 0, 0, 1, 8, x.data(), y.data()), std::invalid_argument);  // len < T+1
  EXPECT_THROW(sample(s, 0, -1, 0, 1, 4, x.data(), y.data()), std::invalid_argument);
  EXPECT_THROW(sample(s, 0, 0, -1, 1, 4, x.data(), y.data()), std::invalid_argument);
  EXPECT_THROW(sample(s, 0, 0, 0, 1, 0, x.data(), y.data()), std::invalid_argument);
  try {
    rank_slice(30, 0, 4);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "global batch 30 is not divisible by data-parallel size 4");
  }
  EXPECT_THROW(rank_slice(16, 4, 4), std::invalid_argument);
  EXPECT_THROW(rank_slice(16, 0, 0), std::invalid_argument);
}

TEST(Sampler, SplitmixMatchesReferenceValues) {
  // First outputs of the reference splitmix64 generator seeded with 0 (state += golden gamma
  // before mixing): 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4.
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64(0x9e3779b97f4a7c15ULL), 0x6e789e6aa1b965f4ULL);
}

}  // namespace
}  // namespace llmp
