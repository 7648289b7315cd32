// The dense MLP the labs tensor_parallel_mlp and sequence_parallel_mlp are checked against, and
// the tests' helpers: every rank draws the full weights, x and dy from one seed and computes the
// MLP and its gradients in double with plain loops (no kernel shared with the code under test);
// shard_of cuts rank r's shard out of it; off() compares a tensor with its expected values within
// kRelTol of the expected tensor's largest element (the float kernels sum at most F products of
// O(1) terms: observed ~2e-7 of that scale, while a planted mistake is off by O(1)).
//
// Glossary: t ranks, r this rank, N rows, C channels, F hidden width, Fs = F/t.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "labs/tensor_parallel_mlp/tp_mlp_shard.h"

namespace llmp {

inline constexpr double kRelTol = 1e-5;

inline double gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double gelu_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI), th = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// The full MLP and its gradients, in double, from float inputs drawn with one seed.
struct DenseMlp {
  int N, C, F;
  std::vector<double> x, W_fc, b_fc, W_proj, b_proj, dy;       // inputs (float values)
  std::vector<double> y, dx, dW_fc, db_fc, dW_proj, db_proj;  // results

  DenseMlp(int n, int c, int f, unsigned seed) : N(n), C(c), F(f) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto draw = [&](int count, double scale) {
      std::vector<double> v(count);
      for (double& e : v) e = static_cast<float>(u(gen) * scale);
      return v;
    };
    x = draw(N * C, 1.0), W_fc = draw(C * F, 1.0 / std::sqrt(C)), b_fc = draw(F, 0.5);
    W_proj = draw(F * C, 1.0 / std::sqrt(F)), b_proj = draw(C, 1.0), dy = draw(N * C, 1.0);

    std::vector<double> h(N * F), a(N * F), dh(N * F, 0.0);
    y.assign(N * C, 0.0), dx.assign(N * C, 0.0), dW_fc.assign(C * F, 0.0);
    db_fc.assign(F, 0.0), dW_proj.assign(F * C, 0.0), db_proj.assign(C, 0.0);
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < F; ++j) {
        double s = b_fc[j];
        for (int c = 0; c < C; ++c) s += x[n * C + c] * W_fc[c * F + j];
        h[n * F + j] = s, a[n * F + j] = gelu(s);
      }
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) {
        double s = b_proj[c];
        for (int j = 0; j < F; ++j) s += a[n * F + j] * W_proj[j * C + c];
        y[n * C + c] = s;
        db_proj[c] += dy[n * C + c];
      }
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < F; ++j) {
        double da = 0;
        for (int c = 0; c < C; ++c) {
          da += dy[n * C + c] * W_proj[j * C + c];
          dW_proj[j * C + c] += a[n * F + j] * dy[n * C + c];
        }
        dh[n * F + j] = gelu_grad(h[n * F + j]) * da;
        db_fc[j] += dh[n * F + j];
        for (int c = 0; c < C; ++c) {
          dW_fc[c * F + j] += x[n * C + c] * dh[n * F + j];
          dx[n * C + c] += dh[n * F + j] * W_fc[c * F + j];
        }
      }
  }
};

inline Tensor tensor(std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32, MemCategory::kParameters);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>(v[i]);
  return t;
}
// Columns [j0, j0 + w) of a row-major (rows, cols) matrix.
inline std::vector<double> columns(const std::vector<double>& m, int rows, int cols, int j0,
                                   int w) {
  std::vector<double> out;
  for (int i = 0; i < rows; ++i)
    out.insert(out.end(), m.begin() + i * cols + j0, m.begin() + i * cols + j0 + w);
  return out;
}
inline std::vector<double> part(const std::vector<double>& v, int begin, int count) {
  return std::vector<double>(v.begin() + begin, v.begin() + begin + count);
}

// Rank r's shard of the dense MLP's parameters, gradients zero.
inline TpMlpShard shard_of(const DenseMlp& d, int t, int r) {
  const int Fs = d.F / t, j0 = r * Fs;
  TpMlpShard s;
  s.w_fc = tensor({d.C, Fs}, columns(d.W_fc, d.C, d.F, j0, Fs));
  s.b_fc = tensor({Fs}, part(d.b_fc, j0, Fs));
  s.w_proj = tensor({Fs, d.C}, part(d.W_proj, j0 * d.C, Fs * d.C));
  s.b_proj = tensor({d.C}, d.b_proj);
  s.dw_fc = Tensor::zeros({d.C, Fs}, DType::kF32, MemCategory::kGradients);
  s.db_fc = Tensor::zeros({Fs}, DType::kF32, MemCategory::kGradients);
  s.dw_proj = Tensor::zeros({Fs, d.C}, DType::kF32, MemCategory::kGradients);
  s.db_proj = Tensor::zeros({d.C}, DType::kF32, MemCategory::kGradients);
  return s;
}

// Largest |got - k·want| relative to the largest |k·want|; "" when within kRelTol, else a report.
inline double g_worst = 0;  // largest relative difference seen in a passing comparison (printed)
inline std::string off(const char* what, const Tensor& got, std::vector<int64_t> shape,
                const std::vector<double>& want, double k = 1.0) {
  if (got.shape() != shape)
    return std::string(what) + ": shape " + shape_str(got.shape()) + ", want " + shape_str(shape);
  double scale = 0, worst = 0;
  int64_t at = 0;
  for (double w : want) scale = std::max(scale, std::fabs(k * w));
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double d = std::fabs(got.f32()[i] - k * want[i]);
    if (!std::isnan(worst) && !(d <= worst)) worst = d, at = i;
  }
  if (worst <= kRelTol * scale) {
    g_worst = std::max(g_worst, worst / scale);
    return "";
  }
  std::ostringstream o;
  o << what << ": max |got - want| = " << worst << " > " << kRelTol << " × " << scale
    << " (largest |want|), at element " << at << ": got " << got.f32()[at] << ", want "
    << k * want[at];
  return o.str();
}

// EXPECT_CLOSE(off(...)) << "context": a failure with off()'s report when it is not empty.
#define EXPECT_CLOSE(report)                                  \
  if (const std::string e_ = (report); e_.empty()) {          \
  } else                                                      \
    ADD_FAILURE() << e_ << "\n  "

}  // namespace llmp
