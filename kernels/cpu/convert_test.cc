// fp32 <-> f16/bf16 conversions: exact widening, round to nearest even, and the underflow and
// overflow counts mixed-precision training reports.
#include "kernels/cpu/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/tensor/tensor.h"

namespace llmp::cpu {
namespace {

std::vector<float> trip(const std::vector<float>& x, DType t, RoundStats* st = nullptr) {
  std::vector<uint16_t> h(x.size());
  round_to(x.data(), h.data(), t, static_cast<int64_t>(x.size()), st);
  std::vector<float> back(x.size());
  widen(h.data(), t, back.data(), static_cast<int64_t>(x.size()));
  return back;
}

TEST(Convert, RepresentableValuesSurviveExactly) {
  const std::vector<float> x = {0.0f, 1.0f, -2.5f, 0.125f, 1024.0f};
  EXPECT_EQ(trip(x, DType::kF16), x);
  EXPECT_EQ(trip(x, DType::kBF16), x);
  EXPECT_EQ(trip({-65504.0f}, DType::kF16)[0], -65504.0f);  // fp16's largest finite
  EXPECT_EQ(trip({std::ldexp(1.0f, 100)}, DType::kBF16)[0], std::ldexp(1.0f, 100));
}

TEST(Convert, RoundsToNearestEven) {
  // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> even (1);
  // 1 + 3·2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 -> even (1 + 2^-6).
  EXPECT_EQ(round_trip(1.0f + std::ldexp(1.0f, -8), DType::kBF16), 1.0f);
  EXPECT_EQ(round_trip(1.0f + 3 * std::ldexp(1.0f, -8), DType::kBF16), 1.0f + std::ldexp(1.0f, -6));
  // Not truncation: just above the tie rounds up.
  EXPECT_EQ(round_trip(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -12), DType::kBF16),
            1.0f + std::ldexp(1.0f, -7));
  // fp16 keeps 11: 1 + 2^-11 ties to 1; 1 + 2^-10 is exact.
  EXPECT_EQ(round_trip(1.0f + std::ldexp(1.0f, -11), DType::kF16), 1.0f);
  EXPECT_EQ(round_trip(1.0f + std::ldexp(1.0f, -10), DType::kF16), 1.0f + std::ldexp(1.0f, -10));
}

TEST(Convert, Fp16UnderflowsAndOverflowsWhereBf16DoesNot) {
  // 2^-26 is below half of fp16's smallest subnormal (2^-24): 0 in fp16, exact in bf16.
  // 1e5 is above fp16's largest finite (65504): inf in fp16, finite in bf16.
  const std::vector<float> x = {std::ldexp(1.0f, -26), 1e5f, 1.0f, 0.0f};
  RoundStats h, b;
  const auto fh = trip(x, DType::kF16, &h);
  const auto fb = trip(x, DType::kBF16, &b);
  EXPECT_EQ(fh[0], 0.0f);
  EXPECT_TRUE(std::isinf(fh[1]));
  EXPECT_EQ(fb[0], std::ldexp(1.0f, -26));
  EXPECT_TRUE(std::isfinite(fb[1]));
  EXPECT_EQ(h.elements, 4);
  EXPECT_EQ(h.nonzero, 3);
  EXPECT_EQ(h.underflow, 1);
  EXPECT_EQ(h.overflow, 1);
  EXPECT_EQ(h.nonfinite, 1);
  EXPECT_EQ(b.underflow, 0);
  EXPECT_EQ(b.overflow, 0);
  // A subnormal that survives (2^-24 is fp16's smallest) is not an underflow.
  RoundStats s;
  EXPECT_EQ(trip({std::ldexp(1.0f, -24)}, DType::kF16, &s)[0], std::ldexp(1.0f, -24));
  EXPECT_EQ(s.underflow, 0);
}

TEST(Convert, NanStaysNanAndIsCounted) {
  RoundStats s;
  const auto r = trip({std::numeric_limits<float>::quiet_NaN(),
                       -std::numeric_limits<float>::infinity()},
                      DType::kF16, &s);
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_TRUE(std::isinf(r[1]) && r[1] < 0);
  EXPECT_EQ(s.nonfinite, 2);
  EXPECT_EQ(s.overflow, 0);  // already infinite in fp32: not an overflow of the rounding
}

TEST(Convert, AccumulateRoundsTheSumOnce) {
  // bf16: 1 + (2^-8 + 2^-8) = 1 + 2^-7 exactly, while two separate 2^-8 additions each tie to 1.
  uint16_t acc[1];
  const float one = 1.0f, tiny2 = std::ldexp(1.0f, -7);
  round_to(&one, acc, DType::kBF16, 1);
  accumulate_to(&tiny2, acc, DType::kBF16, 1);
  float out;
  widen(acc, DType::kBF16, &out, 1);
  EXPECT_EQ(out, 1.0f + std::ldexp(1.0f, -7));
  const float half_ulp = std::ldexp(1.0f, -8);
  accumulate_to(&half_ulp, acc, DType::kBF16, 1);  // tie: 1 + 2^-7 is odd -> 1 + 2^-6
  widen(acc, DType::kBF16, &out, 1);
  EXPECT_EQ(out, 1.0f + std::ldexp(1.0f, -6));
  // f32 accumulation is a plain +=.
  float f = 1.5f;
  accumulate_to(&one, &f, DType::kF32, 1);
  EXPECT_EQ(f, 2.5f);
}

TEST(Convert, OtherDtypesAreRefusedByName) {
  float x = 1;
  double d;
  try {
    round_to(&x, &d, DType::kF64, 1);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
}

}  // namespace
// first_inexact reads exactness off the bits; round_trip (Eigen's conversions) is the reference:
// every binade of fp32 from the subnormals to inf, random and boundary bit patterns.
TEST(Convert, FirstInexactAgreesWithTheRoundTripOnEveryBinade) {
  std::mt19937 rng(7);
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7F800000u, 0x7FC00001u, 0x00000001u,
                                0x33800000u /* 2^-24 */, 0x33C00000u /* 1.5·2^-24 */,
                                0x33000000u /* 2^-25 */, 0x387FC000u /* largest fp16 subnormal */,
                                0x477FE000u /* 65504 */, 0x477FF000u, 0x47800000u /* 2^16 */};
  for (uint32_t e = 0; e < 256; ++e)
    for (int k = 0; k < 64; ++k) {
      const uint32_t m = rng() & 0x7FFFFFu;
      const uint32_t mantissas[] = {m, m & ~0xFFFFu, m & ~0x1FFFu, m & ~0x3FFFFFu, 0};
      for (uint32_t mm : mantissas) bits.push_back((k & 1) << 31 | e << 23 | mm);
    }
  int64_t exact[2] = {0, 0};
  for (uint32_t b : bits) {
    float x;
    std::memcpy(&x, &b, sizeof x);
    for (DType d : {DType::kF16, DType::kBF16}) {
      const float r = round_trip(x, d);
      const bool want = r == x || (std::isnan(r) && std::isnan(x));
      ASSERT_EQ(first_inexact(&x, 1, d), want ? -1 : 0)
          << "bits 0x" << std::hex << b << " in " << to_string(d);
      exact[d == DType::kBF16] += want;
    }
  }
  EXPECT_GT(exact[0], 1000) << "fp16-exact cases";  // both answers are exercised
  EXPECT_GT(exact[1], 1000) << "bf16-exact cases";
  EXPECT_LT(exact[0], static_cast<int64_t>(bits.size()) - 1000);
  const float xs[] = {1.0f, 0.5f, 0.1f, 2.0f, 0.3f};  // the first inexact one is at index 2
  EXPECT_EQ(first_inexact(xs, 5, DType::kBF16), 2);
  EXPECT_EQ(first_inexact(xs, 2, DType::kF16), -1);
  EXPECT_EQ(first_inexact(xs, 5, DType::kF32), -1);
  EXPECT_THROW(first_inexact(xs, 5, DType::kU8), std::invalid_argument);
}

// round_values rounds in place what round_to then widen would give, and leaves f32 alone.
TEST(Convert, RoundValuesIsTheRoundTripInPlace) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> x(4099);
  for (float& v : x) v = nd(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 30);
  x[0] = 70000.0f;  // past fp16's range: inf
  for (DType d : {DType::kF16, DType::kBF16}) {
    std::vector<float> y = x;
    round_values(y.data(), static_cast<int64_t>(y.size()), d);
    EXPECT_EQ(y, trip(x, d)) << to_string(d);
    EXPECT_EQ(first_inexact(y.data(), static_cast<int64_t>(y.size()), d), -1) << to_string(d);
    EXPECT_NE(first_inexact(x.data(), static_cast<int64_t>(x.size()), d), -1) << to_string(d);
  }
  std::vector<float> y = x;
  round_values(y.data(), static_cast<int64_t>(y.size()), DType::kF32);
  EXPECT_EQ(y, x);
  EXPECT_THROW(round_values(y.data(), 1, DType::kF64), std::invalid_argument);
}

}  // namespace llmp::cpu
