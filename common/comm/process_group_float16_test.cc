// 16-bit reductions of ProcessGroup (f16 and bf16, mpi_float16.h), at every world size the BUILD
// file lists, each test once per format. Expected values are worked out by hand below, never by
// replaying the backend's arithmetic:
//   - small integers and halves are exact in both formats (bf16 holds integers up to 256), so
//     x_r[i] = r + 1 + i  =>  sum N(N+1)/2 + N·i,  max N + i,  avg (N+1)/2 + i,  exactly;
//   - rounding to nearest even, one rank pair (the other ranks add 0, which is exact):
//     1 + 3u/4 -> 1 + u (up),  (1 + u) + u/2 -> 1 + 2u (tie, to even),  1 + u/2 -> 1 (tie, to
//     even),  1 + u/4 -> 1,  -1 - 3u/4 -> -(1 + u). Truncation gets the first two wrong,
//     round-half-up the third;
//   - each pairwise addition rounds: rank values 1, 1/8 + u/2, u/64, u/64, ... In any order the
//     u/64 terms (together below half an ulp of anything they meet) are lost, and 1 + 1/8 + u/2
//     is a tie that goes to the even 1.125. The f32 sum, 1.125 + u/2 + (N-2)·u/64, is past the
//     tie for N ≥ 3, so rounding it once gives 1.125 + u: one ulp away, and the collective is
//     not "the f32 sum rounded" (checked at N = 3, 4 and 5 for every order of pairwise sums);
//   - f16 overflows: 65504 + 65504 = 131008 rounds to inf (f16's largest finite is 65504); the
//     same sum in bf16 (65280 + 65280, 65504 is not a bf16 value) is finite, f32's range.
// Bytes: the ring factors of process_group.h with 2-byte elements (all_reduce 2(N-1)/N·2n).
//
// Glossary: N ranks, r this rank, u = ulp(1) (2^-10 f16, 2^-7 bf16), n elements, k per chunk.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "common/comm/process_group.h"

namespace llmp {
namespace {

struct Format {
  DType dtype;
  float u;  // ulp(1)
};

void PrintTo(const Format& f, std::ostream* os) { *os << to_string(f.dtype); }

std::string format_name(const ::testing::TestParamInfo<Format>& info) {
  return to_string(info.param.dtype);
}

float load(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF16 ? static_cast<float>(t.data<Eigen::half>()[i])
                                  : static_cast<float>(t.data<Eigen::bfloat16>()[i]);
}

void store(Tensor& t, int64_t i, float v) {
  if (t.dtype() == DType::kF16)
    t.data<Eigen::half>()[i] = Eigen::half(v);
  else
    t.data<Eigen::bfloat16>()[i] = Eigen::bfloat16(v);
}

uint16_t bits(const Tensor& t, int64_t i) {
  uint16_t b;
  std::memcpy(&b, static_cast<const char*>(t.raw()) + 2 * i, 2);
  return b;
}

// A 16-bit tensor of f(i); each value must be one the format holds (else the test's arithmetic
// would be wrong, not the collective).
Tensor make(DType dt, int64_t n, const std::function<float(int64_t)>& f) {
  Tensor t = Tensor::empty({n}, dt);
  for (int64_t i = 0; i < n; ++i) {
    const float v = f(i);
    store(t, i, v);
    if (!std::isnan(v)) {
      EXPECT_EQ(load(t, i), v) << "test input " << v << " is not a " << to_string(dt) << " value";
    }
  }
  return t;
}

class Float16Test : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    pg = ProcessGroup::world();
    N = pg->size();
    r = pg->rank();
    dt = GetParam().dtype;
    u = GetParam().u;
  }
  double bytes(const char* op) const { return pg->stats().bytes_of(op); }
  double ring(double S) const { return double(N - 1) / N * S; }  // (N-1)/N·S
  // sum_r (r + 1 + j) and its mean over the N ranks.
  float sum_at(int64_t j) const { return static_cast<float>(N * (N + 1) / 2 + N * j); }
  float avg_at(int64_t j) const { return (N + 1) / 2.0f + j; }

  std::shared_ptr<ProcessGroup> pg;
  int N = 1, r = 0;
  DType dt = DType::kF16;
  float u = 0;
};

TEST_P(Float16Test, AllReduceSumOfSmallIntegersIsExactAtTwoBytesPerElement) {
  const int64_t n = 37;
  Tensor t = make(dt, n, [&](int64_t i) { return r + 1 + i; });
  pg->all_reduce(t);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(load(t, i), sum_at(i)) << i;
  EXPECT_DOUBLE_EQ(bytes("all_reduce"), 2.0 * (N - 1) / N * (2 * n));
  EXPECT_DOUBLE_EQ(pg->stats().total_bytes(), 2.0 * (N - 1) / N * (2 * n));
  EXPECT_EQ(pg->stats().calls.at("all_reduce"), 1);
}

TEST_P(Float16Test, AllReduceMaxAndAvg) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 0..4: r + 1 + i; 5: -(r + 1), max -1; 6: NaN on the last rank, max NaN.
  auto x = [&](int64_t i) -> float {
    if (i == 5) return -(r + 1);
    if (i == 6) return r == N - 1 ? nan : r;
    return r + 1 + i;
  };
  Tensor mx = make(dt, 7, x);
  Tensor avg = make(dt, 5, x);
  pg->all_reduce(mx, ReduceOp::kMax);
  pg->all_reduce(avg, ReduceOp::kAvg);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(load(mx, i), static_cast<float>(N + i)) << i;
    EXPECT_EQ(load(avg, i), avg_at(i)) << i;
  }
  EXPECT_EQ(load(mx, 5), -1.0f);
  EXPECT_TRUE(std::isnan(load(mx, 6))) << load(mx, 6);
  EXPECT_DOUBLE_EQ(bytes("all_reduce"), 2.0 * (N - 1) / N * 2 * (7 + 5));
}

// x_r[j] = r + 1 + j over N·k elements; rank r keeps chunk r.
TEST_P(Float16Test, ReduceScatterIsExact) {
  const int64_t k = 6;
  Tensor in = make(dt, N * k, [&](int64_t j) { return r + 1 + j; });
  Tensor out = Tensor::zeros({k}, dt), avg = Tensor::zeros({k}, dt);
  pg->reduce_scatter(in, out);
  pg->reduce_scatter(in, avg, ReduceOp::kAvg);
  for (int64_t i = 0; i < k; ++i) {
    EXPECT_EQ(load(out, i), sum_at(r * k + i)) << i;
    EXPECT_EQ(load(avg, i), avg_at(r * k + i)) << i;
  }
  EXPECT_DOUBLE_EQ(bytes("reduce_scatter"), 2 * ring(N * k * 2.0));
}

// Uneven chunks {2, 0, 4, 5}: rank r gets elements [sum(counts[<r]), +counts[r]).
TEST_P(Float16Test, ReduceScatterVRaggedAndEmpty) {
  std::vector<int64_t> counts(N);
  int64_t total = 0, offset = 0;
  for (int i = 0; i < N; ++i) {
    counts[i] = i % 4 == 1 ? 0 : i + 2;
    offset += i < r ? counts[i] : 0;
    total += counts[i];
  }
  Tensor in = make(dt, total, [&](int64_t j) { return r + 1 + j; });
  Tensor out = Tensor::zeros({counts[r]}, dt), avg = Tensor::zeros({counts[r]}, dt);
  pg->reduce_scatter_v(in, out, counts);
  pg->reduce_scatter_v(in, avg, counts, ReduceOp::kAvg);
  for (int64_t i = 0; i < counts[r]; ++i) {
    EXPECT_EQ(load(out, i), sum_at(offset + i)) << i;
    EXPECT_EQ(load(avg, i), avg_at(offset + i)) << i;
  }
  EXPECT_DOUBLE_EQ(bytes("reduce_scatter"), 2 * ring(total * 2.0));
}

// Root N-1 gets the sum (then the mean); the other ranks' tensors are left as they were.
TEST_P(Float16Test, ReduceToRootIsExact) {
  const int64_t n = 9;
  const int root = N - 1;
  Tensor sum = make(dt, n, [&](int64_t i) { return r + 1 + i; });
  Tensor avg = make(dt, n, [&](int64_t i) { return r + 1 + i; });
  pg->reduce(sum, root);
  pg->reduce(avg, root, ReduceOp::kAvg);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(load(sum, i), r == root ? sum_at(i) : static_cast<float>(r + 1 + i)) << i;
    EXPECT_EQ(load(avg, i), r == root ? avg_at(i) : static_cast<float>(r + 1 + i)) << i;
  }
  EXPECT_DOUBLE_EQ(bytes("reduce"), N == 1 ? 0.0 : 2 * (2.0 * n));
}

// The non-blocking forms divide by N when waited on (DDP's buckets, ZeRO's shards).
TEST_P(Float16Test, AsyncFormsAverageOnCompletion) {
  const int64_t n = 5;
  Tensor t = make(dt, n, [&](int64_t i) { return r + 1 + i; });
  Tensor in = make(dt, N * n, [&](int64_t j) { return r + 1 + j; });
  Tensor out = Tensor::zeros({n}, dt);
  auto a = pg->all_reduce_async(t, ReduceOp::kAvg);
  auto b = pg->reduce_scatter_v_async(in, out, std::vector<int64_t>(N, n), ReduceOp::kAvg);
  a->wait();
  b->wait();
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(load(t, i), avg_at(i)) << i;
    EXPECT_EQ(load(out, i), avg_at(r * n + i)) << i;
  }
  EXPECT_DOUBLE_EQ(bytes("all_reduce"), 2.0 * (N - 1) / N * 2 * n);
  EXPECT_DOUBLE_EQ(bytes("reduce_scatter"), ring(N * n * 2.0));
}

// Ranks 0 and 1 hold a pair, the others 0 (adding 0 is exact, so the order does not matter).
TEST_P(Float16Test, EachAdditionRoundsToNearestEven) {
  const std::vector<float> a = {1, 1 + u, 1, 1, -1};
  const std::vector<float> b = {3 * u / 4, u / 2, u / 2, u / 4, -3 * u / 4};
  const std::vector<float> rounded = {1 + u, 1 + 2 * u, 1, 1, -(1 + u)};
  Tensor t = make(dt, 5, [&](int64_t i) { return r == 0 ? a[i] : r == 1 ? b[i] : 0.0f; });
  pg->all_reduce(t);
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(load(t, i), N == 1 ? a[i] : rounded[i]) << i << ": " << a[i] << " + " << b[i];
}

// Rank values 1, 1/8 + u/2, u/64, ...: 1.125 in every order of pairwise sums; rounding the f32
// sum once would give 1.125 + u from N = 3 on. Within one ulp of the f32 sum either way.
TEST_P(Float16Test, EachPairwiseAdditionRoundsNotTheF32SumOnce) {
  const float x = r == 0 ? 1.0f : r == 1 ? 0.125f + u / 2 : u / 64;
  Tensor t = make(dt, 3, [&](int64_t) { return x; });
  pg->all_reduce(t);
  const double f32_sum = N == 1 ? 1.0 : 1.0 + (0.125 + u / 2.0) + (N - 2) * (u / 64.0);
  Tensor once = make(dt, 1, [&](int64_t) { return N >= 3 ? 1.125f + u : N == 2 ? 1.125f : 1.0f; });
  Tensor f32_rounded = Tensor::empty({1}, dt);
  store(f32_rounded, 0, static_cast<float>(f32_sum));
  ASSERT_EQ(load(f32_rounded, 0), load(once, 0)) << "the test's premise: the f32 sum rounded once";
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(load(t, i), N == 1 ? 1.0f : 1.125f) << i;
    EXPECT_LE(std::fabs(load(t, i) - f32_sum), u) << i;
    if (N >= 3) {
      EXPECT_NE(load(t, i), load(once, 0)) << i;
    }
  }
}

// Values in [1, 2): every rank gets the same bits (replicas stay identical), and the result is
// within N - 1 roundings of the exact sum S, each at most half an ulp of a partial sum, itself at
// most ulp(S)'s binade above: |result - S| ≤ (N - 1)·ulp(S). Small and large messages (MPICH
// picks its algorithm by size).
TEST_P(Float16Test, SameBitsOnEveryRankWithinTheRoundingBound) {
  auto value = [&](int rank, int64_t i) {  // deterministic, representable in both formats
    const uint32_t h = uint32_t(rank + 1) * 2654435761u ^ uint32_t(i) * 40503u;
    return 1.0f + float((h >> 7) % 128) / 128.0f;  // 1 + m/128: 8 significant bits
  };
  for (int64_t n : {7, 5000}) {
    Tensor t = make(dt, n, [&](int64_t i) { return value(r, i); });
    pg->all_reduce(t);
    Tensor all = Tensor::empty({N * n}, dt);
    pg->all_gather(t, all);
    int64_t differ = 0, beyond = 0;
    for (int64_t i = 0; i < n; ++i) {
      double exact = 0;
      for (int q = 0; q < N; ++q) exact += value(q, i);
      const double ulp = u * std::exp2(std::floor(std::log2(exact)));
      beyond += std::fabs(load(t, i) - exact) > (N - 1) * ulp;
      for (int q = 1; q < N; ++q) differ += bits(all, q * n + i) != bits(all, i);
    }
    EXPECT_EQ(differ, 0) << "n = " << n << ": elements whose bits differ between ranks";
    EXPECT_EQ(beyond, 0) << "n = " << n << ": elements beyond (N-1) ulps of the exact sum";
  }
}

// The loss scaler looks for inf: an overflowing f16 sum is inf on every rank, not an error.
TEST_P(Float16Test, OverflowGivesInfInF16AndStaysFiniteInBf16) {
  const float inf = std::numeric_limits<float>::infinity();
  const float big = dt == DType::kF16 ? 65504.0f : 65280.0f;  // f16's largest; a bf16 value
  // 0: big + big; 1: -big - big; 2: inf on rank 0 plus finite values.
  Tensor t = make(dt, 3, [&](int64_t i) -> float {
    if (i == 2) return r == 0 ? inf : 1.0f;
    return r > 1 ? 0.0f : i == 0 ? big : -big;
  });
  pg->all_reduce(t);
  const float sum = N == 1 ? big : dt == DType::kF16 ? inf : 2 * big;
  EXPECT_EQ(load(t, 0), sum);
  EXPECT_EQ(load(t, 1), -sum);
  EXPECT_EQ(load(t, 2), inf);
}

INSTANTIATE_TEST_SUITE_P(Formats, Float16Test,
                         ::testing::Values(Format{DType::kF16, 1.0f / 1024},
                                           Format{DType::kBF16, 1.0f / 128}),
                         format_name);

}  // namespace
}  // namespace llmp
