// Non-blocking operations (Work) and sub-groups (split, merge_stats) against closed forms, at
// every world size the BUILD file lists. Rank-valued inputs as in process_group_test.cc:
//   x_r[i] = r + 1 + i   =>   sum = N(N+1)/2 + N·i,   avg = (N+1)/2 + i.
//
// Glossary: N ranks, r this rank, S bytes of the full tensor.
#include <gtest/gtest.h>
#include <sched.h>

#include <functional>

#include "common/comm/process_group.h"

namespace llmp {
namespace {

Tensor make(int64_t n, const std::function<float(int64_t)>& f) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = f(i);
  return t;
}

class AsyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pg = ProcessGroup::world();
    N = pg->size();
    r = pg->rank();
  }
  std::shared_ptr<ProcessGroup> pg;
  int N = 1, r = 0;
};

// DDP's overlap: three buckets in flight, completed out of order; test() drives progress and
// wait() after completion is a no-op.
TEST_F(AsyncTest, AllReduceBucketsInFlight) {
  std::vector<Tensor> buckets;
  std::vector<std::shared_ptr<Work>> work;
  for (int b = 0; b < 3; ++b) {
    buckets.push_back(make(100 * (b + 1), [&](int64_t i) { return r + 1 + i + 1000 * b; }));
    work.push_back(pg->all_reduce_async(buckets.back()));
  }
  while (!work[1]->test()) sched_yield();
  work[2]->wait();
  work[0]->wait();
  for (auto& w : work) w->wait();  // idempotent
  for (int b = 0; b < 3; ++b)
    for (int64_t i = 0; i < buckets[b].numel(); ++i)
      ASSERT_FLOAT_EQ(buckets[b].f32()[i], N * (N + 1) / 2.0 + N * (i + 1000 * b)) << b << " " << i;
  EXPECT_EQ(pg->stats().calls.at("all_reduce"), 3);
  EXPECT_DOUBLE_EQ(pg->stats().bytes.at("all_reduce"), 2.0 * (N - 1) / N * 600 * 4);
}

// kAvg is a sum on the wire; the division by N happens when the Work completes.
TEST_F(AsyncTest, AllReduceAvgDividesOnCompletion) {
  Tensor t = make(16, [&](int64_t i) { return r + 1 + i; });
  auto w = pg->all_reduce_async(t, ReduceOp::kAvg);
  w->wait();
  w->wait();  // a second wait must not divide again
  for (int64_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(t.f32()[i], (N + 1) / 2.0 + i);
}

// ZeRO-2's gradient shards: uneven counts (the last rank gets the remainder, rank 1 nothing).
TEST_F(AsyncTest, ReduceScatterVAndAllGatherV) {
  std::vector<int64_t> counts(N, 3);
  counts[N - 1] = 5;
  if (N > 2) counts[1] = 0;
  int64_t total = 0, offset = 0;
  for (int q = 0; q < N; ++q) total += counts[q], offset += q < r ? counts[q] : 0;
  Tensor grads = make(total, [&](int64_t j) { return r + 1 + j; });
  Tensor shard = Tensor::zeros({counts[r]});
  auto rs = pg->reduce_scatter_v_async(grads, shard, counts, ReduceOp::kAvg);
  rs->wait();
  for (int64_t i = 0; i < counts[r]; ++i)
    EXPECT_FLOAT_EQ(shard.f32()[i], (N + 1) / 2.0 + offset + i) << i;
  // ... and back: every rank ends with all averaged shards.
  Tensor params = Tensor::zeros({total});
  auto ag = pg->all_gather_v_async(shard, params, counts);
  while (!ag->test()) sched_yield();
  for (int64_t j = 0; j < total; ++j) EXPECT_FLOAT_EQ(params.f32()[j], (N + 1) / 2.0 + j) << j;
  EXPECT_DOUBLE_EQ(pg->stats().bytes.at("reduce_scatter"), double(N - 1) / N * total * 4);
  EXPECT_DOUBLE_EQ(pg->stats().bytes.at("all_gather"), double(N - 1) / N * total * 4);
}

// Pipeline-style exchange: post irecv first, then isend, round the ring (for N == 1 the rank
// sends to itself).
TEST_F(AsyncTest, IsendIrecvRing) {
  const int next = (r + 1) % N, prev = (r + N - 1) % N;
  Tensor out = make(4096, [&](int64_t i) { return 10 * r + i; });
  Tensor in = Tensor::zeros({4096});
  auto rw = pg->irecv(in, prev, /*tag=*/7);
  auto sw = pg->isend(out, next, /*tag=*/7);
  sw->wait();
  rw->wait();
  for (int64_t i = 0; i < 4096; ++i) ASSERT_FLOAT_EQ(in.f32()[i], 10 * prev + i) << i;
  // A group of one rank counts nothing, even for a send to itself.
  EXPECT_DOUBLE_EQ(pg->stats().bytes.at("send"), N == 1 ? 0.0 : 4096 * 4.0);
  EXPECT_DOUBLE_EQ(pg->stats().bytes.at("recv"), 0.0);
}

// Even and odd ranks, each group ordered by descending world rank (key = -r).
TEST_F(AsyncTest, SplitIntoSubGroups) {
  auto sub = pg->split(/*color=*/r % 2, /*key=*/-r);
  std::vector<int> members;
  for (int q = N - 1; q >= 0; --q)
    if (q % 2 == r % 2) members.push_back(q);
  ASSERT_EQ(sub->size(), static_cast<int>(members.size()));
  EXPECT_EQ(sub->world_ranks(), members);
  EXPECT_EQ(sub->world_ranks()[sub->rank()], r);
  Tensor t = make(3, [&](int64_t i) { return r + 1 + i; });
  sub->all_reduce(t);
  double expect = 0;
  for (int q : members) expect += q + 1;
  const int M = sub->size();
  for (int64_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(t.f32()[i], expect + M * i);
  // Stats belong to the group that ran the operation; merge_stats adds groups up.
  EXPECT_EQ(pg->stats().calls.count("all_reduce"), 0u);
  pg->broadcast(t, 0);
  CommStats both = merge_stats({pg.get(), sub.get()});
  EXPECT_DOUBLE_EQ(both.bytes.at("all_reduce"), 2.0 * (M - 1) / M * 12);
  EXPECT_DOUBLE_EQ(both.bytes.at("broadcast"), N == 1 ? 0.0 : 12.0);
  EXPECT_DOUBLE_EQ(both.total_bytes(), 2.0 * (M - 1) / M * 12 + (N == 1 ? 0.0 : 12.0));
}

// kNoColor leaves a rank out: it gets no group.
TEST_F(AsyncTest, SplitLeavesOutNoColor) {
  auto sub = pg->split(r == 0 ? ProcessGroup::kNoColor : 0, r);
  if (r == 0) {
    EXPECT_EQ(sub, nullptr);
  } else {
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), N - 1);
    EXPECT_EQ(sub->rank(), r - 1);
  }
}

}  // namespace
}  // namespace llmp
