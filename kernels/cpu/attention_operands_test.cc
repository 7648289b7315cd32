// Attention under a 16-bit operands declaration (attention.h): P is rounded to the dtype before
// P V, and dS before dS K and dSᵀ Q, nothing else changes. What a student gets wrong here, and
// what catches it:
//   - P rounded after P V, or not at all: out is not the exact product of the kept (rounded) P
//     with V (ForwardMultipliesTheRoundedProbabilities);
//   - attention_probs (selective recomputation) not rounding the way the forward does: its P
//     differs from the forward's (same test);
//   - dS not rounded: the last head's dS left in scratch is not 16-bit
//     (BackwardRoundsDsAndNothingElse);
//   - the rounding put where it changes dV = Pᵀ dY (which reads only P and dY): dV differs from
//     the fp32 kernel's on the same inputs (same test).
//
// Glossary: B batch, T sequence, C channels, H heads, hs = C/H; P (B,H,T,T), qkv (B,T,3C).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/tensor/tensor.h"
#include "common/testing/max_or_nan.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_reference.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/grad_check.h"

namespace llmp {
namespace cpu {
namespace {

using Vec = std::vector<float>;
constexpr int B = 2, T = 13, C = 24, H = 3;

Vec rand_vec(size_t n, uint64_t seed) {
  Vec v(n);
  testing::fill_uniform(v.data(), n, seed, -2.0f, 2.0f);
  return v;
}

/// v rounded to d, element by element (the walk's 16-bit activations, widened).
Vec values_of(Vec v, DType d) {
  round_values(v.data(), static_cast<int64_t>(v.size()), d);
  return v;
}

/// max |a - b| / max |b|.
double rel(const Vec& a, const Vec& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return num / den;
}

TEST(AttentionOperands, ForwardMultipliesTheRoundedProbabilities) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    const Vec qkv = values_of(rand_vec(B * T * 3 * C, 1), d);
    Vec out(B * T * C), att(B * H * T * T), out32(out.size()), att32(att.size());
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H, d);
    attention_forward(out32.data(), att32.data(), qkv.data(), B, T, C, H);
    // The kept P is the fp32 kernel's P rounded to d: the same softmax, then the rounding.
    EXPECT_EQ(att, values_of(att32, d)) << to_string(d);
    EXPECT_EQ(first_inexact(att.data(), static_cast<int64_t>(att.size()), d), -1);
    // out is the product of that kept P with V (in double here; fp32 sums inside the kernel).
    const std::vector<double> y = testing::attention_pv_reference(att.data(), qkv.data(), B, T, C,
                                                                  H);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      worst = testing::max_or_nan(worst, std::fabs(out[i] - y[i]));
      scale = testing::max_or_nan(scale, std::fabs(y[i]));
    }
    EXPECT_LE(worst / scale, 1e-6) << to_string(d) << ": out is not the rounded P times V";
    // The control: rounding P changed out (else this test could not see a missing rounding).
    EXPECT_GT(rel(out, out32), 1e-5) << to_string(d);
    // Selective recomputation makes the same bits again.
    Vec again(att.size());
    attention_probs(again.data(), qkv.data(), B, T, C, H, d);
    EXPECT_EQ(again, att) << to_string(d);
  }
}

TEST(AttentionOperands, BackwardRoundsDsAndNothingElse) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    const Vec qkv = values_of(rand_vec(B * T * 3 * C, 2), d);
    const Vec dout = values_of(rand_vec(B * T * C, 3), d);
    Vec out(B * T * C), att(B * H * T * T);
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H, d);
    Vec dqkv(qkv.size()), dqkv32(qkv.size()), scratch(T * T), scratch32(T * T);
    attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), scratch.data(), B, T, C,
                       H, d);
    attention_backward(dqkv32.data(), dout.data(), qkv.data(), att.data(), scratch32.data(), B, T,
                       C, H);
    // scratch holds the last head's dS: the rounded fp32 one.
    EXPECT_EQ(scratch, values_of(scratch32, d)) << to_string(d);
    EXPECT_NE(scratch, scratch32) << to_string(d) << ": the control, dS had bits to lose";
    double dq = 0, dv = 0;
    for (int n = 0; n < B * T; ++n)
      for (int c = 0; c < C; ++c) {
        const int64_t q = int64_t{n} * 3 * C + c, v = q + 2 * C;
        dq = std::max(dq, static_cast<double>(std::fabs(dqkv[q] - dqkv32[q])));
        dv = std::max(dv, static_cast<double>(std::fabs(dqkv[v] - dqkv32[v])));
      }
    EXPECT_EQ(dv, 0.0) << to_string(d) << ": dV = Pᵀ dY reads no dS";
    EXPECT_GT(dq, 0.0) << to_string(d) << ": dQ = dS K reads the rounded dS";
    EXPECT_LE(rel(dqkv, dqkv32), d == DType::kBF16 ? 1e-2 : 2e-3) << to_string(d);
  }
}

TEST(AttentionOperands, OtherDtypesAreRefusedByName) {
  Vec qkv(B * T * 3 * C, 0.5f), out(B * T * C), att(B * H * T * T);
  try {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H, DType::kF64);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cpu
}  // namespace llmp
