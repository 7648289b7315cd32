// Lab ring_all_reduce: the tests. They reach the code only through ring_all_reduce.h, so this one
// file checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/ring_all_reduce:student_test).
//
// What is checked, and why each expected value holds:
//  - rank-valued inputs x_r[i] = r + 1 + i  =>  sum_r x_r[i] = N(N+1)/2 + N·i. Every value is an
//    integer below 2^24, which float adds exactly in any order, so results are compared exactly;
//  - counts 0, 1, N-1, N, N+1, 1000, 1001 (uneven and empty chunks), a 2-D tensor, a view into a
//    larger buffer (nothing outside it may change), a sub-group whose ranks are reordered;
//  - random data against group.all_reduce: float addition is not associative, and MPI adds the
//    N contributions in its own order (not the ring's), so the two may differ in the last bits.
//    Any order of adding N floats is within (N-1)·u·sum_q |x_q[i]| of the exact sum (u = 2^-24,
//    Higham, "Accuracy and Stability of Numerical Algorithms", §4.2), so each is checked against
//    a double-precision sum within that bound, and the two against each other within twice it;
//    and every rank must end with the same bits (the all-gather phase copies, never re-adds);
//  - traffic: the bytes this rank sent (group.stats(), "send") exactly as the spec's chunks give,
//    4·(2n − c_{(r+1) mod N} − c_{(r+2) mod N}), which is 2(N-1)/N·S when N divides n; within two
//    elements of 2(N-1)/N·S always; 2(N-1)·S over all ranks; 2(N-1) sends and receives;
//  - no collective of the group is used (stats().calls holds "send" and "recv" only);
//  - a 4 MiB tensor finishes: a blocking send on every rank deadlocks once messages are too large
//    for MPI to buffer. A watchdog ends a test still running after kDeadlineS with that hint.
//
// Glossary: N ranks in the group, r this rank, n elements, S = 4n bytes, c_i elements in chunk i.
#include "labs/ring_all_reduce/ring_all_reduce.h"
#include "common/testing/deadline.h"
#include "common/testing/max_or_nan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace llmp {
namespace {

constexpr unsigned kDeadlineS = 60;  // a test still running then ends the job with a hint

Tensor make(std::vector<int64_t> shape, const std::function<float(int64_t)>& f) {
  Tensor t = Tensor::empty(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = f(i);
  return t;
}

// "" when t[i] == want(i) for every i, else how many elements differ and the first three.
std::string wrong(const Tensor& t, const std::function<double(int64_t)>& want) {
  int64_t bad = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float got = t.f32()[i];
    if (double(got) == want(i)) continue;
    if (++bad <= 3) first << "\n    element " << i << " = " << got << ", expected " << want(i);
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(t.numel()) + " elements wrong" + first.str();
}

int64_t chunk(int64_t n, int N, int i) { return n / N + (i < n % N ? 1 : 0); }

// Bytes rank r sends by the spec: every chunk but (r+1) mod N (reduce-scatter), then every chunk
// but (r+2) mod N (all-gather), 4 bytes per element. 0 on one rank.
double spec_bytes(int64_t n, int N, int r) {
  if (N == 1) return 0.0;
  return 4.0 * (2 * n - chunk(n, N, (r + 1) % N) - chunk(n, N, (r + 2) % N));
}

class RingAllReduce : public ::testing::Test {
 protected:
  void SetUp() override {
    group = ProcessGroup::world();  // a fresh group: its CommStats start at zero
    checker = ProcessGroup::world();  // the tests' own collectives, kept out of group's stats
    N = group->size();
    r = group->rank();
    testing::arm_deadline(
        kDeadlineS, r,
        "If every rank first sends (blocking) and then receives, each waits for a neighbour that "
        "is itself waiting in its send, once the message is too large for MPI to buffer "
        "(labs/ring_all_reduce/README.md, \"Why not just send, then receive?\").");
  }
  void TearDown() override { testing::disarm_deadline(); }

  // x_r[i] = r + 1 + i summed over `ranks` ranks.
  static double closed_form(int ranks, int64_t i) { return ranks * (ranks + 1) / 2.0 + ranks * i; }

  std::shared_ptr<ProcessGroup> group, checker;
  int N = 1, r = 0;
};

TEST_F(RingAllReduce, RankValuedInputsSumToTheClosedForm) {
  // One report for all counts (every rank runs every count: a rank that stopped early would leave
  // the others waiting in the ring).
  std::string failed, first;
  for (int64_t n : std::set<int64_t>{0, 1, N - 1, N, N + 1, 1000, 1001}) {
    Tensor x = make({n}, [&](int64_t i) { return r + 1 + i; });
    ring_all_reduce(*group, x);
    const std::string e = wrong(x, [&](int64_t i) { return closed_form(N, i); });
    if (e.empty()) continue;
    failed += (failed.empty() ? "" : ", ") + std::to_string(n);
    if (first.empty()) first = "first, n = " + std::to_string(n) + ": " + e;
  }
  if (!failed.empty())
    ADD_FAILURE() << "N = " << N << ", x_r[i] = r+1+i must sum to N(N+1)/2 + N·i; wrong for n = "
                  << failed << "\n  " << first;
}

TEST_F(RingAllReduce, AnyShapeAndViewsIntoALargerBuffer) {
  Tensor m = make({7, 13}, [&](int64_t i) { return r + 1 + i; });
  ring_all_reduce(*group, m);
  const std::string e2d = wrong(m, [&](int64_t i) { return closed_form(N, i); });
  if (!e2d.empty()) ADD_FAILURE() << "a (7, 13) tensor, x_r[i] = r+1+i (flat index i): " << e2d;

  // Elements [5, 1006) of a 1010-element buffer: the 5 before and 4 after must stay -7.
  Tensor buf = make({1010}, [](int64_t) { return -7.0f; });
  Tensor view = buf.narrow(5, 1001);
  for (int64_t i = 0; i < view.numel(); ++i) view.f32()[i] = r + 1 + i;
  ring_all_reduce(*group, view);
  const std::string ev =
      wrong(buf, [&](int64_t i) { return i < 5 || i >= 1006 ? -7.0 : closed_form(N, i - 5); });
  if (!ev.empty())
    ADD_FAILURE() << "a 1010-element buffer around narrow(5, 1001): the view must hold the sums "
                     "and the elements outside it (-7) must not change: "
                  << ev;
}

TEST_F(RingAllReduce, MatchesGroupAllReduceOnRandomDataWithinRounding) {
  const int64_t n = 4099;  // prime: uneven chunks for every N > 1
  // Every rank draws every rank's input (seeded by rank), so each can form the exact sum.
  std::vector<std::vector<float>> xs(N, std::vector<float>(n));
  for (int q = 0; q < N; ++q) {
    std::mt19937 gen(1000 + q);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : xs[q]) v = dist(gen);
  }
  Tensor ring = make({n}, [&](int64_t i) { return xs[r][i]; });
  Tensor mpi = make({n}, [&](int64_t i) { return xs[r][i]; });
  ring_all_reduce(*group, ring);
  checker->all_reduce(mpi);

  const double u = std::ldexp(1.0, -24);  // unit roundoff of f32
  int64_t ring_bad = 0, mpi_bad = 0, apart = 0, bits_differ = 0;
  double max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    double exact = 0, mag = 0;
    for (int q = 0; q < N; ++q) exact += xs[q][i], mag += std::fabs(xs[q][i]);
    const double bound = 1.0001 * (N - 1) * u * mag;
    const double a = ring.f32()[i], b = mpi.f32()[i];
    ring_bad += !(std::fabs(a - exact) <= bound);  // a NaN counts as bad
    mpi_bad += !(std::fabs(b - exact) <= bound);
    apart += !(std::fabs(a - b) <= 2 * bound);
    bits_differ += a != b;
    max_diff = testing::max_or_nan(max_diff, std::fabs(a - b));
  }
  EXPECT_EQ(ring_bad, 0) << "elements of ring_all_reduce further than (N-1)·u·Σ|x| from the exact sum";
  EXPECT_EQ(mpi_bad, 0) << "elements of group.all_reduce further than (N-1)·u·Σ|x| from the exact sum";
  EXPECT_EQ(apart, 0) << "elements where ring_all_reduce and group.all_reduce differ by more than "
                         "2(N-1)·u·Σ|x|";
  if (r == 0)
    std::printf("N = %d, n = %lld: ring_all_reduce and group.all_reduce differ in the last bits "
                "of %lld elements, by at most %.3g\n",
                N, static_cast<long long>(n), static_cast<long long>(bits_differ), max_diff);

  // The same bits on every rank: compare with rank 0's result.
  Tensor zero = make({n}, [&](int64_t i) { return ring.f32()[i]; });
  checker->broadcast(zero, 0);
  int64_t not_rank0 = 0;
  for (int64_t i = 0; i < n; ++i) not_rank0 += std::memcmp(&zero.f32()[i], &ring.f32()[i], 4) != 0;
  EXPECT_EQ(not_rank0, 0) << "elements where rank " << r << " holds other bits than rank 0: "
                          << "every rank must end with the same sum";
}

TEST_F(RingAllReduce, SendsTwoTimesNMinusOneOverNTimesSBytes) {
  // One line per count that is off, so the report reads as a table.
  std::ostringstream off;
  for (int64_t n : std::set<int64_t>{1, N, 1000, 1001, 4099}) {
    group->reset_stats();
    Tensor x = make({n}, [&](int64_t i) { return r + 1 + i; });
    ring_all_reduce(*group, x);
    const double S = 4.0 * n, sent = group->stats().bytes_of("send");
    const double closed = 2.0 * (N - 1) / N * S, exact = spec_bytes(n, N, r);
    const int64_t sends = group->stats().calls_of("send"), recvs = group->stats().calls_of("recv");
    // Over all ranks every chunk is sent N-1 times per phase: 2(N-1)·S, whatever the chunking.
    Tensor total = make({1}, [&](int64_t) { return static_cast<float>(sent); });
    checker->all_reduce(total);

    // The spec's figure is within two elements of the closed form, and equal when N divides n.
    EXPECT_LE(std::fabs(exact - closed), 2 * 4.0) << "test's own formula, n = " << n;
    if (n % N == 0) {
      EXPECT_EQ(exact, closed) << "test's own formula, n = " << n;
    }
    if (sent != exact || sends != 2 * (N - 1) || recvs != 2 * (N - 1) ||
        total.f32()[0] != 2.0 * (N - 1) * S)
      off << "\n  n = " << n << ": sent " << sent << " bytes in " << sends << " sends and "
          << recvs << " receives; want " << exact << " bytes = 4·(2n − c_{(r+1) mod N} − "
          << "c_{(r+2) mod N}) (2(N-1)/N·S = " << closed << ") in " << 2 * (N - 1)
          << " sends and receives; all ranks together sent " << total.f32()[0] << ", want "
          << "2(N-1)·S = " << 2.0 * (N - 1) * S;
  }
  if (!off.str().empty())
    ADD_FAILURE() << "N = " << N << ", rank " << r << ", bytes counted under \"send\":" << off.str();
}

TEST_F(RingAllReduce, UsesOnlySendAndRecvNeverACollective) {
  Tensor x = make({1000}, [&](int64_t i) { return r + 1 + i; });
  ring_all_reduce(*group, x);
  EXPECT_EQ(group->stats().calls_of("all_reduce"), 0)
      << "ring_all_reduce must not call group.all_reduce";
  for (const auto& kv : group->stats().calls)
    EXPECT_TRUE(kv.first == "send" || kv.first == "recv")
        << "ring_all_reduce called group." << kv.first << " (" << kv.second
        << " times): only send/recv/isend/irecv are allowed";
}

TEST_F(RingAllReduce, SubGroupWithReorderedRanks) {
  // Ranks numbered in reverse (key = -r), in two groups (even and odd world ranks) from 4 ranks
  // on: group rank and world rank differ, so a ring built from world ranks goes wrong.
  std::shared_ptr<ProcessGroup> sub = group->split(N >= 4 ? r % 2 : 0, -r);
  const int M = sub->size(), q = sub->rank();
  const int64_t n = 1001;
  Tensor x = make({n}, [&](int64_t i) { return q + 1 + i; });
  ring_all_reduce(*sub, x);
  const std::string e = wrong(x, [&](int64_t i) { return closed_form(M, i); });
  if (!e.empty())
    ADD_FAILURE() << "sub-group of " << M << " ranks (this is its rank " << q << ", world rank "
                  << r << "), x[i] = q+1+i must sum to M(M+1)/2 + M·i: " << e;
  EXPECT_EQ(sub->stats().bytes_of("send"), spec_bytes(n, M, q)) << "bytes sent in the sub-group";
  EXPECT_EQ(group->stats().calls_of("send"), 0) << "the world group was not the one passed";
}

TEST_F(RingAllReduce, FourMiBFinishesWithoutDeadlock) {
  // 1 MiB chunks at N = 4: far above what MPI sends eagerly (buffered at the receiver), so each
  // send completes only once its receive is posted.
  const int64_t n = (int64_t{1} << 20) + 3;  // sums stay below 2^24: exact
  Tensor x = make({n}, [&](int64_t i) { return r + 1 + i; });
  ring_all_reduce(*group, x);
  const std::string e = wrong(x, [&](int64_t i) { return closed_form(N, i); });
  if (!e.empty()) ADD_FAILURE() << "n = 2^20 + 3, x_r[i] = r+1+i must sum to N(N+1)/2 + N·i: " << e;
  EXPECT_EQ(static_cast<int64_t>(group->stats().bytes_of("send")),
            static_cast<int64_t>(spec_bytes(n, N, r)))
      << "bytes sent, want 4·(2n − c_{(r+1) mod N} − c_{(r+2) mod N})";
}

}  // namespace
}  // namespace llmp
