// Lab softmax_kernel: the tests. They reach the code only through softmax_kernel.h, and this one
// file is built twice: against the CUDA emulator (reference_test, student_test: g++, the kernel
// run on the CPU, any machine) and against the CUDA toolkit (reference_gpu_test,
// student_gpu_test: nvcc's kernel on a GPU; each test SKIPPED with the runtime's reason where
// there is none).
//
// What is checked, and why each expected value holds:
//  - random rows in [-4, 4] against a softmax in double precision, for row lengths around a warp
//    and a block (1, 2, 31, 32, 33, 127, 128, 129), long rows (1000, 4099) and 1, 5 or 67 rows:
//    within 1e-6 + 1e-5·y_ref per element (fp32 rounding of expf, of the sum and of 1/s), each
//    row summing to 1 within 1e-5;
//  - every element of y written, nothing outside it: y starts as NaN and 1,024 floats on each
//    side of it hold a sentinel that must survive; x's bits unchanged;
//  - values of ±10,000 (exp overflows f32 past 88.7, so the max must be subtracted) and equal
//    rows (y = 1/C);
//  - −inf entries (a causal mask: row n sees columns 0..n) get exactly 0, and a row with one
//    finite element exactly 1 there;
//  - N < 0 and C < 1 refused by name, N = 0 launching nothing (last: an unfinished starter may
//    end the process there, and the tests above have reported by then).
//
// Glossary: N rows, C row length, G sentinel floats on each side of y.
#include "labs/softmax_kernel/softmax_kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/device_allocator.h"  // cuda_device_available

namespace llmp::lab {
namespace {

constexpr int64_t kGuard = 1024;       // sentinel floats on each side of y
constexpr float kSentinel = 12345.0f;  // what they hold

// Every test is SKIPPED with the runtime's reason where there is no GPU (the emulator has one):
// cuda_device_available, as the project's GPU twin tests (kernels/cuda/twin_test_util.h).
class SoftmaxKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  }
};

// Device memory for n floats, freed at scope end.
struct DeviceFloats {
  explicit DeviceFloats(int64_t n) {
    EXPECT_EQ(cudaMalloc(&p, sizeof(float) * std::max<int64_t>(n, 1)), cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(p); }
  float* p = nullptr;
};

// What softmax_rows left: y's N·C elements, the sentinels around them, and x as it was after.
struct Result {
  std::vector<float> y, before, after, x_after;
};

// Runs softmax_rows on x (N·C floats) with y surrounded by sentinels and starting as NaN.
Result run(const std::vector<float>& x, int N, int C) {
  const int64_t n = int64_t{N} * C;
  DeviceFloats dx(n), dy(n + 2 * kGuard);
  std::vector<float> init(n + 2 * kGuard, kSentinel);
  for (int64_t i = 0; i < n; ++i) init[kGuard + i] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(cudaMemcpy(dx.p, x.data(), sizeof(float) * n, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dy.p, init.data(), sizeof(float) * init.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  softmax_rows(dx.p, dy.p + kGuard, N, C, /*stream=*/nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> all(init.size());
  Result r;
  r.x_after.resize(n);
  EXPECT_EQ(cudaMemcpy(all.data(), dy.p, sizeof(float) * all.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(r.x_after.data(), dx.p, sizeof(float) * n, cudaMemcpyDeviceToHost),
            cudaSuccess);
  r.before.assign(all.begin(), all.begin() + kGuard);
  r.y.assign(all.begin() + kGuard, all.begin() + kGuard + n);
  r.after.assign(all.begin() + kGuard + n, all.end());
  return r;
}

// The softmax of one row in double (−inf entries give 0).
std::vector<double> softmax_ref(const float* x, int C) {
  double m = -INFINITY, s = 0;
  for (int c = 0; c < C; ++c) m = std::max(m, double(x[c]));
  std::vector<double> y(C);
  for (int c = 0; c < C; ++c) s += (y[c] = std::exp(double(x[c]) - m));
  for (double& v : y) v /= s;
  return y;
}

// "" when r is right for x (N rows of C), else the first problems found, one per line.
std::string problems(const std::vector<float>& x, int N, int C, const Result& r) {
  std::ostringstream out;
  int reported = 0;
  auto report = [&](const std::string& what) {
    if (reported++ < 4) out << "\n    " << what;
  };
  for (int n = 0; n < N; ++n) {
    const std::vector<double> want = softmax_ref(&x[int64_t{n} * C], C);
    double sum = 0;
    for (int c = 0; c < C; ++c) {
      const float got = r.y[int64_t{n} * C + c];
      sum += got;
      if (!(std::fabs(got - want[c]) <= 1e-6 + 1e-5 * want[c]))  // NaN (never written) fails
        report("y[" + std::to_string(n) + "][" + std::to_string(c) + "] = " + std::to_string(got) +
               ", want " + std::to_string(want[c]));
    }
    if (!(std::fabs(sum - 1.0) <= 1e-5))
      report("row " + std::to_string(n) + " sums to " + std::to_string(sum) + ", want 1");
  }
  for (int64_t i = 0; i < kGuard; ++i) {
    if (r.before[i] != kSentinel)
      report("y[" + std::to_string(i - kGuard) + "] (before y) was written");
    if (r.after[i] != kSentinel)
      report("y[N·C + " + std::to_string(i) + "] (after y) was written");
  }
  if (std::memcmp(x.data(), r.x_after.data(), sizeof(float) * x.size()) != 0)
    report("x was written");
  if (reported > 4) out << "\n    ... " << reported - 4 << " more";
  return out.str();
}

std::vector<float> random_rows(int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = u(gen);
  return x;
}

TEST_F(SoftmaxKernel, MatchesTheDoubleSoftmaxForEveryRowLength) {
  std::ostringstream off;
  for (int C : {1, 2, 31, 32, 33, 127, 128, 129, 1000, 4099})
    for (int N : {1, 5, 67}) {
      const std::vector<float> x = random_rows(int64_t{N} * C, -4.0f, 4.0f, 100 * C + N);
      const std::string p = problems(x, N, C, run(x, N, C));
      if (!p.empty()) off << "\n  N = " << N << ", C = " << C << ":" << p;
    }
  EXPECT_TRUE(off.str().empty()) << "random rows in [-4, 4]:" << off.str();
}

TEST_F(SoftmaxKernel, LargeValuesDoNotOverflow) {
  // exp(x) alone is +inf for x > 88.7: the max must come off first.
  const int N = 5, C = 300;
  const std::vector<float> x = random_rows(int64_t{N} * C, -10000.0f, 10000.0f, 7);
  const std::string p = problems(x, N, C, run(x, N, C));
  EXPECT_TRUE(p.empty()) << "rows in [-10000, 10000]:" << p;
  // Equal rows of a large value: y = 1/C everywhere.
  const std::vector<float> same(int64_t{N} * C, 500.0f);
  const std::string q = problems(same, N, C, run(same, N, C));
  EXPECT_TRUE(q.empty()) << "every element 500 (want 1/C):" << q;
}

TEST_F(SoftmaxKernel, MaskedEntriesGetExactlyZero) {
  // A causal mask: row n sees columns 0..n (row 0: one finite element, whose y must be 1).
  const int N = 40, C = 37;
  std::vector<float> x = random_rows(int64_t{N} * C, -2.0f, 2.0f, 9);
  for (int n = 0; n < N; ++n)
    for (int c = n + 1; c < C; ++c) x[int64_t{n} * C + c] = -INFINITY;
  const Result r = run(x, N, C);
  const std::string p = problems(x, N, C, r);
  EXPECT_TRUE(p.empty()) << "causally masked rows:" << p;
  int64_t not_zero = 0;
  for (int n = 0; n < N; ++n)
    for (int c = n + 1; c < C; ++c) not_zero += r.y[int64_t{n} * C + c] != 0.0f;
  EXPECT_EQ(not_zero, 0) << "masked (−inf) entries whose y is not exactly 0";
  EXPECT_EQ(r.y[0], 1.0f) << "row 0 has one finite element: its y must be exactly 1";
}

TEST_F(SoftmaxKernel, BadSizesAreRefusedByNameAndNoRowsLaunchNothing) {
  DeviceFloats dx(4), dy(4);
  auto message = [&](int N, int C) -> std::string {
    try {
      softmax_rows(dx.p, dy.p, N, C, nullptr);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  EXPECT_EQ(message(-1, 4), "softmax_rows: N = -1 (want N >= 0)");
  EXPECT_EQ(message(2, 0), "softmax_rows: C = 0 (want C >= 1)");
  const Result r = run({}, 0, 3);  // N = 0: no launch, so no launch error either
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "N = 0 must launch nothing";
  for (int64_t i = 0; i < kGuard; ++i) ASSERT_EQ(r.after[i], kSentinel) << "N = 0 wrote y";
}

}  // namespace
}  // namespace llmp::lab
