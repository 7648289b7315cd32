// Cross-entropy's CUDA steps (cross_entropy.h) against the CPU twin (kernels/cpu/cross_entropy.h):
// part of kernels_twin_test (the same skip without a GPU: every CrossEntropyTwin test is SKIPPED
// with the runtime's reason; on the CUDA emulator, kernels_twin_emulated_test, they run).
//
//   - a vocabulary shard (v0 = 1000 of V = 3000), the steps apart as a tensor-parallel rank runs
//     them: steps 1 and 2 leave the logits as they are, step 3 writes the fp32 gradient;
//   - the whole vocabulary in one pass (cross_entropy_max_sums: the online max and sum), with a
//     padded vocabulary's -inf logits, a row whose threads mostly see only -inf, and the gradient
//     rounded to bf16 by step 3 itself, as the head under bf16 asks (gpt_embed_head.cc);
//   - a NaN logit makes the one-pass sum NaN, as the two steps make it (a non-finite loss is
//     seen, not hidden);
//   - step 3 without backward leaves the logits alone (the evaluation's loss).
// Bounds as kernels_twin_test's: rows 1e-5 (relative to max(1, max|ref|)); the loss 1e-5
// relative; the max exact. A bf16 gradient: every element a bf16 value, and within one bf16 ulp
// (2⁻⁸ relative) of the CPU's, the two differing only where fp32 ulps move a value across a
// rounding boundary (at most 1% of elements here).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "common/testing/max_or_nan.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/twin_test_util.h"

namespace llmp {
namespace {

using test::Dev;
using test::DevF;
using test::rel_err;
using test::rnd;
using test::Vec;
constexpr float kRow = 1e-5f;

using CrossEntropyTwin = test::GpuTwin;

TEST_F(CrossEntropyTwin, VocabularyShardStepsWithBackward) {
  const int CN = 9, Vr = 1000, v0 = 1000;  // the second shard of V = 3000
  std::vector<int32_t> y(CN);
  for (int n = 0; n < CN; ++n) y[n] = n * 331 % 3000;  // inside and outside [1000, 2000)
  const Vec z0 = rnd(CN * Vr, 70, -6.0f, 6.0f);
  Vec z = z0, m(CN), sums(2 * CN);
  Dev<int32_t> y_d(y);
  DevF z_d(z0), m_d(CN), s_d(2 * CN);
  cpu::cross_entropy_row_max(m.data(), z.data(), CN, Vr);
  cpu::cross_entropy_exp_sums(sums.data(), z.data(), y.data(), v0, CN, Vr, m.data());
  const double ref = cpu::cross_entropy_loss(z.data(), y.data(), v0, CN, Vr, m.data(),
                                             sums.data(), 0.5f, true, DType::kF32);
  cuda::cross_entropy_row_max(m_d.p, z_d.p, CN, Vr);
  cuda::cross_entropy_exp_sums(s_d.p, z_d.p, y_d.p, v0, CN, Vr, m_d.p);
  EXPECT_EQ(z_d.get(), z0) << "steps 1 and 2 wrote over the logits";
  const double got = cuda::cross_entropy_loss(z_d.p, y_d.p, v0, CN, Vr, m_d.p, s_d.p, 0.5f, true,
                                              DType::kF32);
  EXPECT_EQ(m_d.get(), m);  // a max is exact
  EXPECT_LE(rel_err(s_d.get(), sums, "cross_entropy sums"), kRow);
  EXPECT_LE(rel_err(z_d.get(), z, "cross_entropy dz"), kRow);
  std::printf("cross_entropy loss %.9g, cpu %.9g\n", got, ref);
  EXPECT_NEAR(got, ref, 1e-5 * std::fabs(ref));
}

TEST_F(CrossEntropyTwin, WholeVocabularyInOnePassWithABf16Gradient) {
  const int CN = 9, V = 3000, pad = 40;  // the last 40 columns pad the vocabulary: -inf
  std::vector<int32_t> y(CN);
  for (int n = 0; n < CN; ++n) y[n] = n * 331 % (V - pad);
  Vec z0 = rnd(CN * V, 71, -6.0f, 6.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int n = 0; n < CN; ++n)
    for (int v = V - pad; v < V; ++v) z0[n * V + v] = -inf;
  for (int v = 10; v < V; ++v) z0[4 * V + v] = -inf;  // row 4: 10 logits, 246 threads see -inf
  y[4] = 7;
  Vec z = z0, m(CN), sums(2 * CN);
  Dev<int32_t> y_d(y);
  DevF z_d(z0), m_d(CN), s_d(2 * CN);
  cpu::cross_entropy_max_sums(m.data(), sums.data(), z.data(), y.data(), 0, CN, V);
  const double ref = cpu::cross_entropy_loss(z.data(), y.data(), 0, CN, V, m.data(), sums.data(),
                                             0.5f, true, DType::kBF16);
  cuda::cross_entropy_max_sums(m_d.p, s_d.p, z_d.p, y_d.p, 0, CN, V);
  EXPECT_EQ(z_d.get(), z0) << "cross_entropy_max_sums wrote over the logits";
  const double got = cuda::cross_entropy_loss(z_d.p, y_d.p, 0, CN, V, m_d.p, s_d.p, 0.5f, true,
                                              DType::kBF16);
  EXPECT_EQ(m_d.get(), m);
  EXPECT_LE(rel_err(s_d.get(), sums, "cross_entropy one-pass sums"), kRow);
  const Vec dz = z_d.get();
  EXPECT_EQ(cpu::first_inexact(dz.data(), CN * V, DType::kBF16), -1) << "a gradient not bf16";
  // Finite logits: within one bf16 ulp of the largest gradient, and mostly equal. A -inf logit:
  // 0 exactly (the CPU's Eigen exp clamps -inf to exp(-88.4), a gradient below 2⁻¹²⁶ that the
  // head then zeroes, gpt_embed_head.cc).
  int differ = 0, finite = 0;
  float worst = 0.0f, scale = 0.0f;
  for (int i = 0; i < CN * V; ++i) {
    if (z0[i] == -inf) {
      EXPECT_EQ(dz[i], 0.0f) << "the gradient of a -inf logit, element " << i;
      continue;
    }
    ++finite;
    differ += dz[i] != z[i];
    worst = testing::max_or_nan(worst, std::fabs(dz[i] - z[i]));
    scale = testing::max_or_nan(scale, std::fabs(z[i]));
  }
  std::printf("bf16 dz: %d of %d finite logits' gradients differ from the CPU's, by at most %.3g"
              " of the largest\n", differ, finite, worst / scale);
  EXPECT_LE(worst, scale / 256);
  EXPECT_LE(differ, finite / 100);
  std::printf("cross_entropy loss (one pass) %.9g, cpu %.9g\n", got, ref);
  EXPECT_NEAR(got, ref, 1e-5 * std::fabs(ref));
}

TEST_F(CrossEntropyTwin, ANanLogitMakesTheOnePassSumNan) {
  const int CN = 3, V = 700;
  const std::vector<int32_t> y = {1, 2, 3};
  Vec z0 = rnd(CN * V, 72, -3.0f, 3.0f);
  z0[1 * V + 500] = std::numeric_limits<float>::quiet_NaN();
  Dev<int32_t> y_d(y);
  DevF z_d(z0), m_d(CN), s_d(2 * CN);
  cuda::cross_entropy_max_sums(m_d.p, s_d.p, z_d.p, y_d.p, 0, CN, V);
  const Vec s = s_d.get();
  EXPECT_TRUE(std::isfinite(s[0]) && std::isfinite(s[2])) << s[0] << " " << s[2];
  EXPECT_TRUE(std::isnan(s[1])) << "row 1's sum is " << s[1];
}

TEST_F(CrossEntropyTwin, LossWithoutBackwardLeavesTheLogits) {
  const int CN = 9, Vr = 1000, v0 = 0;
  std::vector<int32_t> y(CN);
  for (int n = 0; n < CN; ++n) y[n] = n * 97 % Vr;
  const Vec z0 = rnd(size_t{CN} * Vr, 3, -6.0f, 6.0f);
  Vec z = z0, m(CN), sums(2 * CN);
  Dev<int32_t> y_d(y);
  DevF z_d(z0), m_d(CN), s_d(2 * CN);
  cpu::cross_entropy_max_sums(m.data(), sums.data(), z.data(), y.data(), v0, CN, Vr);
  const double ref = cpu::cross_entropy_loss(z.data(), y.data(), v0, CN, Vr, m.data(),
                                             sums.data(), 1.0f, false, DType::kF32);
  cuda::cross_entropy_max_sums(m_d.p, s_d.p, z_d.p, y_d.p, v0, CN, Vr);
  const double got = cuda::cross_entropy_loss(z_d.p, y_d.p, v0, CN, Vr, m_d.p, s_d.p, 1.0f, false,
                                              DType::kBF16);
  EXPECT_EQ(z_d.get(), z0);  // no backward: the logits stay as they were
  std::printf("cross_entropy loss (no backward) %.9g, cpu %.9g\n", got, ref);
  EXPECT_NEAR(got, ref, 1e-5 * std::fabs(ref));
}

}  // namespace
}  // namespace llmp
