// The bookkeeping path of ProcessGroup, at every world size the BUILD file lists: a duplicate()
// group is the same ranks with CommStats and messages of its own, f64 reductions are exact, and
// u8 bytes are moved as they are (all_gather_strings). Metrics, the report table and span
// gathering rely on these.
//
// Rank-valued f64 inputs whose sums f32 could not hold: with a = 2^33 and e = 2^-10,
//   x_r[i] = a + (r + 1)·e + i   =>   sum_r x_r[i] = N·a + e·N(N+1)/2 + N·i,   max = a + N·e + i.
// Every partial sum is a multiple of e below 2^36, so a double holds it exactly in any order
// (53-bit mantissa); a float (24 bits) cannot even hold one input.
//
// Glossary: N ranks, r this rank, k elements per chunk, S bytes of the full tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/comm/all_gather_strings.h"
#include "common/comm/process_group.h"

namespace llmp {
namespace {

constexpr double kA = 8589934592.0;  // 2^33
constexpr double kE = 1.0 / 1024;    // 2^-10

Tensor rank_valued_f64(int64_t n, int r) {
  Tensor t = Tensor::empty({n}, DType::kF64);
  for (int64_t i = 0; i < n; ++i) t.f64()[i] = kA + (r + 1) * kE + i;
  return t;
}

class BookkeepingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pg = ProcessGroup::world();
    N = pg->size();
    r = pg->rank();
  }
  std::shared_ptr<ProcessGroup> pg;
  int N = 1, r = 0;
};

TEST_F(BookkeepingTest, InputsAreBeyondFloat) {
  const double x = kA + kE;
  EXPECT_NE(static_cast<double>(static_cast<float>(x)), x) << "the f64 tests would prove nothing";
}

TEST_F(BookkeepingTest, F64AllReduceSumsExactly) {
  const int64_t n = 9;
  Tensor sum = rank_valued_f64(n, r), mx = rank_valued_f64(n, r), avg = rank_valued_f64(n, r);
  pg->all_reduce(sum);
  pg->all_reduce(mx, ReduceOp::kMax);
  pg->all_reduce(avg, ReduceOp::kAvg);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(sum.f64()[i], N * kA + kE * N * (N + 1) / 2 + N * i) << i;
    EXPECT_EQ(mx.f64()[i], kA + N * kE + i) << i;
    EXPECT_DOUBLE_EQ(avg.f64()[i], kA + kE * (N + 1) / 2 + i) << i;  // sum · (1/N): one rounding
  }
  // S = 8 bytes per element.
  EXPECT_DOUBLE_EQ(pg->stats().bytes.at("all_reduce"), 3 * 2.0 * (N - 1) / N * n * 8);
}

// Rank q keeps chunk q of the sum: x_r[j] summed over r at j = q·k + i.
TEST_F(BookkeepingTest, F64ReduceScatterAndReduceAreExact) {
  const int64_t k = 4;
  Tensor in = rank_valued_f64(N * k, r), out = Tensor::zeros({k}, DType::kF64);
  pg->reduce_scatter(in, out);
  for (int64_t i = 0; i < k; ++i)
    EXPECT_EQ(out.f64()[i], N * kA + kE * N * (N + 1) / 2 + N * (r * k + i)) << i;
  Tensor t = rank_valued_f64(k, r);
  pg->reduce(t, 0);
  if (r == 0) {
    for (int64_t i = 0; i < k; ++i) EXPECT_EQ(t.f64()[i], N * kA + kE * N * (N + 1) / 2 + N * i);
  }
}

// Rank q contributes q + 1 bytes 16q + i; everyone ends with all of them, in rank order.
TEST_F(BookkeepingTest, U8BytesAreMovedAsTheyAre) {
  std::vector<int64_t> counts(N);
  int64_t total = 0;
  for (int q = 0; q < N; ++q) counts[q] = q + 1, total += q + 1;
  Tensor mine = Tensor::empty({r + 1}, DType::kU8), all = Tensor::zeros({total}, DType::kU8);
  for (int i = 0; i <= r; ++i) mine.data<uint8_t>()[i] = uint8_t(16 * r + i);
  pg->all_gather_v(mine, all, counts);
  int64_t at = 0;
  for (int q = 0; q < N; ++q)
    for (int i = 0; i <= q; ++i) EXPECT_EQ(all.data<uint8_t>()[at++], 16 * q + i) << q << " " << i;
  EXPECT_DOUBLE_EQ(pg->stats().bytes.at("all_gather"), double(N - 1) / N * total);
}

// Rank q's string: q copies of the letter 'a' + q, then a NUL byte and the digit q (rank 0's is
// "\0" "0"); every rank ends with all of them, by rank.
TEST_F(BookkeepingTest, AllGatherStringsRaggedWithNulBytes) {
  auto text = [](int q) {
    return std::string(q, char('a' + q)) + std::string(1, '\0') + char('0' + q);
  };
  const std::vector<std::string> all = all_gather_strings(*pg, text(r));
  ASSERT_EQ(static_cast<int>(all.size()), N);
  for (int q = 0; q < N; ++q) EXPECT_EQ(all[q], text(q)) << q;
  const std::vector<std::string> none = all_gather_strings(*pg, "");
  for (int q = 0; q < N; ++q) EXPECT_EQ(none[q], "") << q;
}

// The duplicate's bytes land in its own CommStats, never in the original's, and the other way
// round.
TEST_F(BookkeepingTest, DuplicateTrafficIsNotCountedInTheOriginal) {
  auto dup = pg->duplicate();
  ASSERT_NE(dup, nullptr);
  EXPECT_EQ(dup->size(), N);
  EXPECT_EQ(dup->rank(), r);
  EXPECT_EQ(dup->world_ranks(), pg->world_ranks());
  Tensor t = rank_valued_f64(5, r);
  dup->all_reduce(t);
  dup->barrier();
  EXPECT_EQ(t.f64()[0], N * kA + kE * N * (N + 1) / 2);  // it really reduced over all N ranks
  EXPECT_TRUE(pg->stats().calls.empty());
  EXPECT_DOUBLE_EQ(pg->stats().total_bytes(), 0.0);
  EXPECT_DOUBLE_EQ(dup->stats().bytes.at("all_reduce"), 2.0 * (N - 1) / N * 5 * 8);
  EXPECT_EQ(dup->stats().calls.at("barrier"), 1);

  Tensor u = Tensor::zeros({3});
  pg->all_reduce(u);
  EXPECT_EQ(dup->stats().calls.at("all_reduce"), 1);
  EXPECT_EQ(pg->stats().calls.at("all_reduce"), 1);
  EXPECT_DOUBLE_EQ(pg->stats().total_bytes(), 2.0 * (N - 1) / N * 3 * 4);
}

// The duplicate has a communicator of its own: a message sent on it first, with the same source
// and tag, is not what a recv on the original receives (on one shared communicator, MPI's
// non-overtaking rule would deliver it first).
TEST_F(BookkeepingTest, DuplicateMessagesNeverMatchTheOriginals) {
  auto dup = pg->duplicate();
  const int next = (r + 1) % N, prev = (r + N - 1) % N;
  Tensor on_dup = Tensor::empty({1}, DType::kF64), on_pg = Tensor::empty({1}, DType::kF64);
  on_dup.f64()[0] = 1000 + r;
  on_pg.f64()[0] = 2000 + r;
  auto s1 = dup->isend(on_dup, next, /*tag=*/7);
  auto s2 = pg->isend(on_pg, next, /*tag=*/7);
  Tensor got_pg = Tensor::empty({1}, DType::kF64), got_dup = Tensor::empty({1}, DType::kF64);
  pg->recv(got_pg, prev, 7);
  dup->recv(got_dup, prev, 7);
  s1->wait();
  s2->wait();
  EXPECT_EQ(got_pg.f64()[0], 2000 + prev);
  EXPECT_EQ(got_dup.f64()[0], 1000 + prev);
}

// Bookkeeping groups are split and duplicated like any other: a duplicate of a sub-group
// reduces over the sub-group only.
TEST_F(BookkeepingTest, DuplicateOfASubGroup) {
  auto sub = pg->split(r % 2, r);
  auto dup = sub->duplicate();
  EXPECT_EQ(dup->world_ranks(), sub->world_ranks());
  Tensor t = Tensor::empty({1}, DType::kF64);
  t.f64()[0] = r;
  dup->all_reduce(t);
  double expect = 0;
  for (int q = r % 2; q < N; q += 2) expect += q;
  EXPECT_EQ(t.f64()[0], expect);
  EXPECT_TRUE(sub->stats().calls.empty());
}

}  // namespace
}  // namespace llmp
