// Blocking collectives of ProcessGroup against closed forms, at every world size the BUILD file
// lists (mpi_test: _np1 ... _np4). Inputs are rank-valued, so each result has a formula:
//   x_r[i] = r + 1 + i   =>   sum_r x_r[i] = N(N+1)/2 + N·i,   max = N + i,   avg = (N+1)/2 + i.
// Bytes counted per rank are asserted against the ring factors of process_group.h:
//   all_reduce 2(N-1)/N·S,  reduce_scatter / all_gather / all_to_all (N-1)/N·S,
//   broadcast / reduce / send S,  and 0 on a group of one rank.
//
// Glossary: N ranks, r this rank, k elements per chunk, S bytes of the full tensor.
#include <gtest/gtest.h>

#include <functional>

#include "common/comm/process_group.h"

namespace llmp {
namespace {

Tensor make(int64_t n, const std::function<float(int64_t)>& f) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = f(i);
  return t;
}

// Ragged counts with zeros: {2, 0, 4, 5, 6, 0, 8, ...} (counts[i] = 0 when i % 4 == 1).
std::vector<int64_t> ragged(int n) {
  std::vector<int64_t> c(n);
  for (int i = 0; i < n; ++i) c[i] = i % 4 == 1 ? 0 : i + 2;
  return c;
}

int64_t sum(const std::vector<int64_t>& v, int end) {
  int64_t s = 0;
  for (int i = 0; i < end; ++i) s += v[i];
  return s;
}

class ProcessGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pg = ProcessGroup::world();
    N = pg->size();
    r = pg->rank();
  }
  // Bytes counted for `op` (0 when never counted) and the expected ring volume.
  double bytes(const char* op) const { return pg->stats().bytes_of(op); }
  double ring(double S) const { return double(N - 1) / N * S; }  // (N-1)/N·S
  double whole(double S) const { return N == 1 ? 0.0 : S; }      // S, 0 alone

  std::shared_ptr<ProcessGroup> pg;
  int N = 1, r = 0;
};

TEST_F(ProcessGroupTest, AllReduceSum) {
  const int64_t n = 37;
  Tensor t = make(n, [&](int64_t i) { return r + 1 + i; });
  pg->all_reduce(t);
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(t.f32()[i], N * (N + 1) / 2.0 + N * i) << i;
  EXPECT_DOUBLE_EQ(bytes("all_reduce"), 2.0 * (N - 1) / N * n * 4);
  EXPECT_EQ(pg->stats().calls.at("all_reduce"), 1);
  EXPECT_DOUBLE_EQ(pg->stats().total_bytes(), 2.0 * (N - 1) / N * n * 4);
  // The lookups the tests use: the counted value, 0 for an operation never called.
  EXPECT_EQ(pg->stats().calls_of("all_reduce"), 1);
  EXPECT_DOUBLE_EQ(pg->stats().bytes_of("all_reduce"), 2.0 * (N - 1) / N * n * 4);
  EXPECT_EQ(pg->stats().calls_of("all_gather"), 0);
  EXPECT_EQ(pg->stats().bytes_of("all_gather"), 0.0);
  EXPECT_EQ(pg->stats().calls.count("all_gather"), 0u) << "a lookup must not add the entry";
  EXPECT_EQ(pg->stats().calls_str(), " all_reduce ×1");
  EXPECT_EQ(CommStats().calls_str(), " (none)");
}

TEST_F(ProcessGroupTest, AllReduceMaxAndAvg) {
  Tensor mx = make(5, [&](int64_t i) { return r + 1 + i; });
  Tensor avg = make(5, [&](int64_t i) { return r + 1 + i; });
  pg->all_reduce(mx, ReduceOp::kMax);
  pg->all_reduce(avg, ReduceOp::kAvg);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_FLOAT_EQ(mx.f32()[i], N + i);
    EXPECT_FLOAT_EQ(avg.f32()[i], (N + 1) / 2.0 + i);
  }
  EXPECT_EQ(pg->stats().calls.at("all_reduce"), 2);
  EXPECT_DOUBLE_EQ(bytes("all_reduce"), 2 * 2.0 * (N - 1) / N * 5 * 4);
}

// input x_r[j] = r + 1 + j over N·k elements; rank r keeps chunk r: N(N+1)/2 + N·(r·k + i).
TEST_F(ProcessGroupTest, ReduceScatter) {
  const int64_t k = 6;
  Tensor in = make(N * k, [&](int64_t j) { return r + 1 + j; });
  Tensor out = Tensor::zeros({k}), avg = Tensor::zeros({k});
  pg->reduce_scatter(in, out);
  pg->reduce_scatter(in, avg, ReduceOp::kAvg);
  for (int64_t i = 0; i < k; ++i) {
    EXPECT_FLOAT_EQ(out.f32()[i], N * (N + 1) / 2.0 + N * (r * k + i)) << i;
    EXPECT_FLOAT_EQ(avg.f32()[i], (N + 1) / 2.0 + (r * k + i)) << i;
  }
  EXPECT_DOUBLE_EQ(bytes("reduce_scatter"), 2 * ring(N * k * 4.0));
}

// Uneven chunks, some empty: rank r gets elements [sum(counts[<r]), +counts[r]) of the sum.
TEST_F(ProcessGroupTest, ReduceScatterVRaggedAndEmpty) {
  const std::vector<int64_t> counts = ragged(N);
  const int64_t total = sum(counts, N), offset = sum(counts, r);
  Tensor in = make(total, [&](int64_t j) { return r + 1 + j; });
  Tensor out = Tensor::zeros({counts[r]}), avg = Tensor::zeros({counts[r]});
  pg->reduce_scatter_v(in, out, counts);
  pg->reduce_scatter_v(in, avg, counts, ReduceOp::kAvg);
  for (int64_t i = 0; i < counts[r]; ++i) {
    EXPECT_FLOAT_EQ(out.f32()[i], N * (N + 1) / 2.0 + N * (offset + i)) << i;
    EXPECT_FLOAT_EQ(avg.f32()[i], (N + 1) / 2.0 + (offset + i)) << i;
  }
  EXPECT_DOUBLE_EQ(bytes("reduce_scatter"), 2 * ring(total * 4.0));
}

// x_r[i] = 100·r + i; output chunk q holds rank q's input.
TEST_F(ProcessGroupTest, AllGather) {
  const int64_t k = 5;
  Tensor in = make(k, [&](int64_t i) { return 100 * r + i; });
  Tensor out = Tensor::zeros({N * k});
  pg->all_gather(in, out);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < k; ++i) EXPECT_FLOAT_EQ(out.f32()[q * k + i], 100 * q + i);
  EXPECT_DOUBLE_EQ(bytes("all_gather"), ring(N * k * 4.0));
}

// ZeRO's pattern: the input is this rank's shard of the flat output buffer (gathered in place).
TEST_F(ProcessGroupTest, AllGatherInPlaceShard) {
  const int64_t k = 4;
  Tensor flat = Tensor::zeros({N * k});
  Tensor shard = flat.narrow(r * k, k);
  for (int64_t i = 0; i < k; ++i) shard.f32()[i] = 100 * r + i;
  pg->all_gather(shard, flat);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < k; ++i) EXPECT_FLOAT_EQ(flat.f32()[q * k + i], 100 * q + i);
}

TEST_F(ProcessGroupTest, AllGatherVRaggedAndInPlace) {
  const std::vector<int64_t> counts = ragged(N);
  const int64_t total = sum(counts, N);
  Tensor in = make(counts[r], [&](int64_t i) { return 100 * r + i; });
  Tensor out = Tensor::zeros({total}), flat = Tensor::zeros({total});
  pg->all_gather_v(in, out, counts);
  Tensor shard = flat.narrow(sum(counts, r), counts[r]);
  if (counts[r] > 0) shard.copy_from(in);
  pg->all_gather_v(shard, flat, counts);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < counts[q]; ++i) {
      EXPECT_FLOAT_EQ(out.f32()[sum(counts, q) + i], 100 * q + i);
      EXPECT_FLOAT_EQ(flat.f32()[sum(counts, q) + i], 100 * q + i);
    }
  EXPECT_DOUBLE_EQ(bytes("all_gather"), 2 * ring(total * 4.0));
}

// 16-bit tensors are moved bit for bit (as 16-bit integers); S counts 2 bytes per element.
TEST_F(ProcessGroupTest, AllGatherAndBroadcastHalf) {
  const int64_t k = 3;
  Tensor in = Tensor::empty({k}, DType::kBF16), out = Tensor::zeros({N * k}, DType::kBF16);
  for (int64_t i = 0; i < k; ++i) in.data<uint16_t>()[i] = uint16_t(1000 * r + i);
  pg->all_gather(in, out);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < k; ++i) EXPECT_EQ(out.data<uint16_t>()[q * k + i], 1000 * q + i);
  Tensor h = Tensor::empty({k}, DType::kF16);
  for (int64_t i = 0; i < k; ++i) h.data<uint16_t>()[i] = uint16_t(r == N - 1 ? 0xBEEF + i : 0);
  pg->broadcast(h, N - 1);
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(h.data<uint16_t>()[i], 0xBEEF + i);
  EXPECT_DOUBLE_EQ(bytes("all_gather"), ring(N * k * 2.0));
  EXPECT_DOUBLE_EQ(bytes("broadcast"), whole(k * 2.0));
}

// From the last rank (a non-zero root whenever N > 1).
TEST_F(ProcessGroupTest, BroadcastFromNonZeroRoot) {
  const int root = N - 1;
  Tensor t = make(9, [&](int64_t i) { return r == root ? 7.0f + i : -1.0f; });
  pg->broadcast(t, root);
  for (int64_t i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(t.f32()[i], 7 + i);
  EXPECT_DOUBLE_EQ(bytes("broadcast"), whole(9 * 4.0));
}

TEST_F(ProcessGroupTest, ReduceToRoot) {
  const int root = N / 2;
  Tensor s = make(4, [&](int64_t i) { return r + 1 + i; });
  Tensor m = make(4, [&](int64_t i) { return r + 1 + i; });
  pg->reduce(s, root);
  pg->reduce(m, root, ReduceOp::kMax);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(s.f32()[i], r == root ? N * (N + 1) / 2.0 + N * i : r + 1 + i);
    EXPECT_FLOAT_EQ(m.f32()[i], r == root ? N + i : r + 1 + i);
  }
  EXPECT_DOUBLE_EQ(bytes("reduce"), 2 * whole(4 * 4.0));
}

// Chunk j of rank i goes to chunk i of rank j: in_r[j·k + i] = 1000r + 100j + i,
// so out_r[q·k + i] = 1000q + 100r + i.
TEST_F(ProcessGroupTest, AllToAll) {
  const int64_t k = 3;
  Tensor in = make(N * k, [&](int64_t x) { return 1000 * r + 100 * (x / k) + x % k; });
  Tensor out = Tensor::zeros({N * k});
  pg->all_to_all(in, out);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < k; ++i) EXPECT_FLOAT_EQ(out.f32()[q * k + i], 1000 * q + 100 * r + i);
  EXPECT_DOUBLE_EQ(bytes("all_to_all"), ring(N * k * 4.0));
}

// Blocking ring: even ranks send then receive, odd ranks receive then send (no deadlock for any
// N, whatever the message size). The sender counts S, the receiver 0.
TEST_F(ProcessGroupTest, SendRecvRing) {
  if (N == 1) GTEST_SKIP() << "a ring of one rank sends to itself; see the async test";
  const int next = (r + 1) % N, prev = (r + N - 1) % N;
  Tensor out = make(1000, [&](int64_t i) { return 10 * r + i; });
  Tensor in = Tensor::zeros({1000});
  if (r % 2 == 0) {
    pg->send(out, next, /*tag=*/3);
    pg->recv(in, prev, /*tag=*/3);
  } else {
    pg->recv(in, prev, 3);
    pg->send(out, next, 3);
  }
  for (int64_t i = 0; i < 1000; ++i) EXPECT_FLOAT_EQ(in.f32()[i], 10 * prev + i);
  EXPECT_DOUBLE_EQ(bytes("send"), 1000 * 4.0);
  EXPECT_DOUBLE_EQ(bytes("recv"), 0.0);
  EXPECT_EQ(pg->stats().calls.at("recv"), 1);
}

TEST_F(ProcessGroupTest, BarrierCountsNoBytes) {
  pg->barrier();
  EXPECT_EQ(pg->stats().calls.at("barrier"), 1);
  EXPECT_DOUBLE_EQ(pg->stats().total_bytes(), 0.0);
  pg->reset_stats();
  EXPECT_TRUE(pg->stats().calls.empty());
}

// A group of one rank: every collective is a local no-op (or copy) and counts 0 bytes.
TEST_F(ProcessGroupTest, GroupOfOneIsANoOp) {
  auto self = pg->split(/*color=*/r, /*key=*/0);
  ASSERT_EQ(self->size(), 1);
  EXPECT_EQ(self->world_ranks(), std::vector<int>{r});
  Tensor t = make(8, [&](int64_t i) { return r + i; });
  Tensor gathered = Tensor::zeros({8}), scattered = Tensor::zeros({8});
  self->all_reduce(t, ReduceOp::kAvg);
  self->broadcast(t, 0);
  self->reduce(t, 0);
  self->all_gather(t, gathered);
  self->reduce_scatter(t, scattered);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(t.f32()[i], r + i);
    EXPECT_FLOAT_EQ(gathered.f32()[i], r + i);
    EXPECT_FLOAT_EQ(scattered.f32()[i], r + i);
  }
  EXPECT_DOUBLE_EQ(self->stats().total_bytes(), 0.0);
  EXPECT_EQ(self->stats().calls.at("all_reduce"), 1);
}

}  // namespace
}  // namespace llmp
