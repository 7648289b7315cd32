// What a twin test compares with, on the host: random inputs, bf16-valued inputs, and the relative
// difference each test prints and bounds. Shared by the GPU twin tests (twin_test_util.h) and the
// emulated ones (attention_block_tc_emulated_test); no CUDA. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace test {

using Vec = std::vector<float>;

/// n uniform values in [lo, hi) from seed.
inline Vec rnd(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (float& x : v) x = u(g);
  return v;
}

/// n uniform values in [-1, 1], each a bf16 value (rounded to nearest even).
inline Vec bf16_values(size_t n, unsigned seed) {
  Vec v = rnd(n, seed);
  std::vector<uint16_t> bits(n);
  cpu::round_to(v.data(), bits.data(), DType::kBF16, static_cast<int64_t>(n));
  cpu::widen(bits.data(), DType::kBF16, v.data(), static_cast<int64_t>(n));
  return v;
}

/// max_i |got_i - ref_i| / max(1, max_i |ref_i|), printed under `what`; +inf when some got_i is
/// not finite where ref_i is (a NaN would otherwise drop out of the max).
inline float rel_err(const Vec& got, const Vec& ref, const char* what) {
  EXPECT_EQ(got.size(), ref.size()) << what;
  float d = 0.0f, s = 1.0f;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(ref[i])) {
      std::printf("%-28s element %zu is %g where the reference is %g\n", what, i, got[i], ref[i]);
      return std::numeric_limits<float>::infinity();
    }
    d = std::max(d, std::fabs(got[i] - ref[i]));
    s = std::max(s, std::fabs(ref[i]));
  }
  std::printf("%-28s relative difference %.3g\n", what, d / s);
  return d / s;
}

}  // namespace test
}  // namespace llmp
