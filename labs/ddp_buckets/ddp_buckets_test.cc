// Lab ddp_buckets: the tests. They reach the code only through ddp_buckets.h, so this one file
// checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/ddp_buckets:student_test).
//
// Each test plays the backward: for each parameter, in the order the test chooses, it writes this
// rank's gradient of that parameter into grads (NaN until then) and calls on_grad_ready; then
// finish(). Every rank can draw every rank's gradient (a seed per step and rank), so each rank
// checks the mean itself. What is checked, and why each expected value holds:
//  - after finish(), grads = the mean of the N ranks' gradients, in double, within kTol (the
//    all_reduce sums in float in MPI's order; observed ~1e-7), and the 8 floats after grads (a
//    view of a longer buffer, holding 1000 + rank) unchanged;
//  - after EACH on_grad_ready, how many all_reduces have started and how many bytes they carry
//    (dp.stats(), counted when an operation starts), against hand-worked tables: sizes
//    {3, 5, 2, 4, 6} with caps of 1, 20, 24 (a bucket of exactly the cap closes), 32 and 1 MiB
//    bytes. Too many started means a bucket all-reduced before its gradients were written; too
//    few, one that waits to the end (no overlap);
//  - gradients in a different order on each rank (reverse, forward, mixed): the same buckets
//    start in the same order everywhere, a completed bucket waiting for the ones before it;
//  - 30 parameters of random sizes over 3 steps with one GradBucketer: each step the same
//    launches, and each bucket, read from the bytes each call added, a contiguous run of
//    parameters holding at least the cap (but the last) and under it without its last-added one;
//  - ranks 1..N-1 run their whole backward before rank 0 starts its own: an on_grad_ready that
//    waits for the other ranks (a blocking all_reduce) deadlocks there, and a watchdog ends the
//    test after kDeadlineS with that hint;
//  - bad arguments refused by name, before anything is started.
//
// Glossary: P parameters, Ψ elements, N ranks, r this rank, t the step, f = 2(N-1)/N·4 the
// all_reduce's bytes per element.
#include "labs/ddp_buckets/ddp_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/testing/deadline.h"
#include "common/testing/max_or_nan.h"

namespace llmp::lab {
namespace {

constexpr unsigned kDeadlineS = 60;  // a test still running then ends the job with a hint

constexpr double kTol = 1e-6;
constexpr int kSentinels = 8;

// Rank q's gradient of all Ψ elements at step t.
std::vector<float> gradient(int64_t psi, int t, int q) {
  std::mt19937 gen(1000 * t + q + 7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> g(psi);
  for (float& e : g) e = u(gen);
  return g;
}

std::vector<int64_t> offsets(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> o(sizes.size(), 0);
  for (size_t i = 1; i < sizes.size(); ++i) o[i] = o[i - 1] + sizes[i - 1];
  return o;
}

int64_t total(const std::vector<int64_t>& sizes) {
  int64_t n = 0;
  for (int64_t s : sizes) n += s;
  return n;
}

std::vector<int> reverse_order(int P) {
  std::vector<int> o(P);
  for (int i = 0; i < P; ++i) o[i] = P - 1 - i;
  return o;
}

std::string str(const std::vector<int64_t>& v) {
  std::ostringstream out;
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "[") << v[i];
  return out.str() + "]";
}

// grads: Ψ floats, a view of a longer buffer whose kSentinels floats after it hold 1000 + r (an
// all_reduce past Ψ averages them into something else at N > 1).
struct Buffer {
  Tensor backing, grads;
};
Buffer make_buffer(int64_t psi, int r) {
  Buffer b;
  b.backing = Tensor::empty({psi + kSentinels}, DType::kF32, MemCategory::kGradients);
  for (int64_t i = 0; i < psi + kSentinels; ++i) b.backing.f32()[i] = 1000.0f + r;
  b.grads = b.backing.narrow(0, psi);
  return b;
}

// After each on_grad_ready of a step: the all_reduces started so far and the elements they carry
// (bytes / f; at N = 1 the bytes are 0 and only the calls tell).
struct StepLog {
  std::vector<int64_t> calls, elements;
  std::string other_ops;  // any operation but all_reduce the step used
};

// One step of the backward in `order`: grads NaN, then each parameter's gradient written just
// before its on_grad_ready; then finish().
StepLog run_step(ProcessGroup& dp, GradBucketer& gb, Buffer& buf,
                 const std::vector<int64_t>& sizes, const std::vector<int>& order, int t) {
  const int N = dp.size();
  const std::vector<int64_t> o = offsets(sizes);
  const std::vector<float> g = gradient(total(sizes), t, dp.rank());
  std::fill(buf.grads.f32(), buf.grads.f32() + buf.grads.numel(),
            std::numeric_limits<float>::quiet_NaN());
  dp.reset_stats();
  StepLog log;
  const double f = 2.0 * (N - 1) / N * 4;
  for (int i : order) {
    std::copy(g.begin() + o[i], g.begin() + o[i] + sizes[i], buf.grads.f32() + o[i]);
    gb.on_grad_ready(i);
    log.calls.push_back(dp.stats().calls_of("all_reduce"));
    log.elements.push_back(N > 1 ? std::llround(dp.stats().bytes_of("all_reduce") / f) : 0);
  }
  gb.finish();
  for (const auto& kv : dp.stats().calls)
    if (kv.first != "all_reduce")
      log.other_ops += " " + kv.first + " x" + std::to_string(kv.second);
  return log;
}

// "" when grads holds the mean of the N ranks' step-t gradients and the sentinels survived.
std::string problems(const Buffer& buf, int N, int r, int t) {
  const int64_t psi = buf.grads.numel();
  std::vector<double> mean(psi, 0.0);
  for (int q = 0; q < N; ++q) {
    const std::vector<float> g = gradient(psi, t, q);
    for (int64_t i = 0; i < psi; ++i) mean[i] += double(g[i]) / N;
  }
  std::ostringstream out;
  int bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < psi; ++i) {
    const double d = std::fabs(buf.grads.f32()[i] - mean[i]);
    worst = testing::max_or_nan(worst, d);
    if (!(d <= kTol) && bad++ < 3)
      out << "\n    grads[" << i << "] = " << buf.grads.f32()[i] << ", the mean is " << mean[i];
  }
  if (bad > 0) out << "\n    " << bad << " of " << psi << " elements off (largest " << worst << ")";
  for (int k = 0; k < kSentinels; ++k)
    if (buf.backing.f32()[psi + k] != 1000.0f + r)
      out << "\n    the float " << k << " past grads was written: " << buf.backing.f32()[psi + k];
  return out.str();
}

class DdpBuckets : public ::testing::Test {
 protected:
  void SetUp() override {
    group = ProcessGroup::world();    // a fresh group: its CommStats start at zero
    checker = ProcessGroup::world();  // the tests' own messages, kept out of group's stats
    N = group->size();
    r = group->rank();
    testing::arm_deadline(
        kDeadlineS, r,
        "on_grad_ready must start its all_reduces and return (all_reduce_async), not wait for "
        "them: a rank that waits there waits for ranks that have not reached that point of their "
        "backward yet (labs/ddp_buckets/README.md, \"Overlap, and the one rule ...\").");
  }
  void TearDown() override { testing::disarm_deadline(); }

  std::shared_ptr<ProcessGroup> group, checker;
  int N = 1, r = 0;
};

const std::vector<int64_t> kSizes = {3, 5, 2, 4, 6};  // Ψ = 20

struct Case {
  int64_t cap_bytes;
  std::vector<int> order;
  std::vector<int64_t> calls, elements;  // after each on_grad_ready, hand-worked
};

void check_case(ProcessGroup& dp, const Case& c, int N, int r) {
  Buffer buf = make_buffer(total(kSizes), r);
  GradBucketer gb(dp, buf.grads, kSizes, c.cap_bytes);
  const StepLog log = run_step(dp, gb, buf, kSizes, c.order, 1);
  std::ostringstream order;
  for (int i : c.order) order << " " << i;
  const std::string where = "cap " + std::to_string(c.cap_bytes) + " bytes, sizes {3, 5, 2, 4, " +
                            "6}, gradients ready in the order" + order.str() + ", rank " +
                            std::to_string(r) + " of " + std::to_string(N);
  EXPECT_EQ(str(log.calls), str(c.calls)) << where << ": all_reduces started after each one";
  if (N > 1)
    EXPECT_EQ(str(log.elements), str(c.elements))
        << where << ": elements those all_reduces carry, after each one";
  EXPECT_EQ(log.other_ops, "") << where << ": operations other than all_reduce";
  const std::string p = problems(buf, N, r, 1);
  EXPECT_TRUE(p.empty()) << where << ":" << p;
}

// Buckets for the caps of the header's example, gradients in reverse order: each bucket starts
// in the call that readies its lowest parameter.
TEST_F(DdpBuckets, BucketsCloseAtTheCapAndStartWhenTheirLastGradientIsReady) {
  const std::vector<int> rev = reverse_order(5);
  const std::vector<Case> cases = {
      // {4} {3,2} {1} {0}: 24, 24, 20, 12 bytes
      {20, rev, {1, 1, 2, 3, 4}, {6, 6, 12, 17, 20}},
      // {4} {3,2} {1,0}: 24 bytes is the cap itself, so {4} closes alone
      {24, rev, {1, 1, 2, 2, 3}, {6, 6, 12, 12, 20}},
      // {4,3} {2,1,0}: 40, 40 bytes
      {32, rev, {0, 1, 1, 1, 2}, {0, 10, 10, 10, 20}},
      // one parameter per bucket
      {1, rev, {1, 2, 3, 4, 5}, {6, 10, 12, 17, 20}},
      // one bucket: no overlap at all, as one all_reduce at the end
      {1 << 20, rev, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 20}},
  };
  for (const Case& c : cases) check_case(*group, c, N, r);
}

// Each rank its own order (rank r: orders[r % 3]); cap 20, buckets {4} {3,2} {1} {0}.
TEST_F(DdpBuckets, GradientsInAnyOrderStartTheBucketsInBucketOrder) {
  const std::vector<Case> orders = {
      {20, {4, 3, 2, 1, 0}, {1, 1, 2, 3, 4}, {6, 6, 12, 17, 20}},
      // 0 completes bucket 3 early: it waits for buckets 1 and 2, then all start in the last call
      {20, {2, 4, 0, 3, 1}, {0, 1, 1, 2, 4}, {0, 6, 6, 12, 20}},
      // forward order: bucket 0 is ready last, so nothing can start before it
      {20, {0, 1, 2, 3, 4}, {0, 0, 0, 0, 4}, {0, 0, 0, 0, 20}},
  };
  check_case(*group, orders[r % 3], N, r);
}

// 30 parameters of 1..3000 elements (the same on every rank), cap 16 KiB, three steps.
TEST_F(DdpBuckets, ThreeStepsOfOneBucketerEachBucketAContiguousRunAtTheCap) {
  std::mt19937 gen(42);
  std::uniform_int_distribution<int64_t> size(1, 3000);
  std::vector<int64_t> sizes(30);
  for (int64_t& s : sizes) s = size(gen);
  const int P = 30;
  const int64_t cap = 16384;
  Buffer buf = make_buffer(total(sizes), r);
  GradBucketer gb(*group, buf.grads, sizes, cap);
  const std::vector<int> rev = reverse_order(P);
  StepLog first;
  for (int t = 1; t <= 3; ++t) {
    const StepLog log = run_step(*group, gb, buf, sizes, rev, t);
    const std::string p = problems(buf, N, r, t);
    EXPECT_TRUE(p.empty()) << "step " << t << ", rank " << r << " of " << N << ":" << p;
    EXPECT_EQ(log.other_ops, "") << "step " << t << ": operations other than all_reduce";
    if (t == 1) {
      first = log;
      continue;
    }
    EXPECT_EQ(str(log.calls), str(first.calls))
        << "step " << t << ": all_reduces started after each on_grad_ready, against step 1's";
  }
  // Read the buckets back from step 1: in reverse order each call starts at most one bucket, the
  // one whose lowest parameter it readied.
  ASSERT_EQ(first.calls.size(), size_t(P));
  int64_t prev_calls = 0, prev_elements = 0;
  int upper = P;  // one past the highest parameter of the next bucket
  for (int e = 0; e < P; ++e) {
    const int i = rev[e];
    const int64_t started = first.calls[e] - prev_calls;
    ASSERT_TRUE(started == 0 || started == 1)
        << "on_grad_ready(" << i << ") started " << started << " all_reduces (at most 1 here)";
    if (started == 0) continue;
    int64_t n = 0;  // the elements of parameters i .. upper-1
    for (int j = i; j < upper; ++j) n += sizes[j];
    if (N > 1)
      EXPECT_EQ(first.elements[e] - prev_elements, n)
          << "the all_reduce started by on_grad_ready(" << i << ") is parameters " << i << ".."
          << upper - 1;
    if (i > 0) EXPECT_GE(4 * n, cap) << "bucket of parameters " << i << ".." << upper - 1;
    EXPECT_LT(4 * (n - sizes[i]), cap)
        << "bucket of parameters " << i << ".." << upper - 1 << " was full without " << i;
    prev_calls = first.calls[e], prev_elements = first.elements[e], upper = i;
  }
  EXPECT_EQ(upper, 0) << "parameters 0.." << upper - 1 << " never all-reduced";
}

// Ranks 1..N-1 do their whole backward, then tell rank 0, which only then does its own.
TEST_F(DdpBuckets, NoRankWaitsInsideOnGradReadyForTheOthers) {
  Buffer buf = make_buffer(total(kSizes), r);
  GradBucketer gb(*group, buf.grads, kSizes, 20);
  const std::vector<int64_t> o = offsets(kSizes);
  const std::vector<float> g = gradient(total(kSizes), 1, r);
  std::fill(buf.grads.f32(), buf.grads.f32() + buf.grads.numel(), 0.0f);
  Tensor token = Tensor::zeros({1});
  auto backward = [&] {
    for (int i = 4; i >= 0; --i) {
      std::copy(g.begin() + o[i], g.begin() + o[i] + kSizes[i], buf.grads.f32() + o[i]);
      gb.on_grad_ready(i);
    }
  };
  if (r == 0) {
    for (int q = 1; q < N; ++q) checker->recv(token, q);
    backward();
  } else {
    backward();
    checker->send(token, 0);
  }
  gb.finish();
  const std::string p = problems(buf, N, r, 1);
  EXPECT_TRUE(p.empty()) << "rank " << r << " of " << N << ":" << p;
  EXPECT_EQ(group->stats().calls_of("all_reduce"), 4) << "buckets {4} {3,2} {1} {0}";
}

TEST_F(DdpBuckets, BadArgumentsAreRefusedByName) {
  Buffer buf = make_buffer(20, r);
  auto made = [&](const std::vector<int64_t>& sizes, int64_t cap, Tensor& g) -> std::string {
    try {
      GradBucketer gb(*group, g, sizes, cap);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  EXPECT_EQ(made({}, 20, buf.grads), "GradBucketer: no parameters (sizes is empty)");
  EXPECT_EQ(made({3, 5, 0, 4, 8}, 20, buf.grads), "GradBucketer: sizes[2] = 0 (want >= 1)");
  EXPECT_EQ(made(kSizes, 0, buf.grads), "GradBucketer: cap_bytes = 0 (want >= 1)");
  Tensor short_grads = buf.backing.narrow(0, 19);
  EXPECT_EQ(made(kSizes, 20, short_grads), "GradBucketer: grads has 19 elements, sizes sum to 20");
  Tensor f64 = Tensor::zeros({20}, DType::kF64);
  EXPECT_EQ(made(kSizes, 20, f64), "GradBucketer: grads is not a host f32 tensor");

  GradBucketer gb(*group, buf.grads, kSizes, 1 << 20);  // one bucket: nothing starts early
  auto ready = [&](int i) -> std::string {
    try {
      gb.on_grad_ready(i);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  EXPECT_EQ(ready(5), "on_grad_ready: i = 5 (want 0 <= i < 5)");
  EXPECT_EQ(ready(-1), "on_grad_ready: i = -1 (want 0 <= i < 5)");
  EXPECT_EQ(ready(3), "(nothing thrown)");
  EXPECT_EQ(ready(3), "on_grad_ready: parameter 3 is already ready this step");
  std::string finished = "(nothing thrown)";
  try {
    gb.finish();
  } catch (const std::logic_error& e) {
    finished = e.what();
  }
  EXPECT_EQ(finished, "finish: 4 of 5 parameters not ready");
  EXPECT_EQ(group->stats().calls_of("all_reduce"), 0)
      << "nothing may start before the one bucket is ready";
}

}  // namespace
}  // namespace llmp::lab
