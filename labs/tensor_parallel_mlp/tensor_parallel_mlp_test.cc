// Lab tensor_parallel_mlp: the tests. They reach the code only through tensor_parallel_mlp.h, so
// this one file checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/tensor_parallel_mlp:student_test).
//
// Every rank draws the full (dense) weights, x and dy from one fixed seed, computes the dense
// single-rank MLP and its gradients in double precision with plain loops (no kernel shared with
// the code under test), cuts its own shard out of the full weights (columns [r·F/t, (r+1)·F/t)
// of W_fc and b_fc, the same rows of W_proj, all of b_proj), and runs tp_mlp_forward /
// tp_mlp_backward. What is checked:
//  - y and dx equal the dense ones on every rank, and each shard gradient equals its slice of the
//    dense gradient (db_proj: all of it), within kRelTol of the tensor's largest element: the
//    float kernels sum at most F = 48 products of O(1) terms, whose rounding stays below ~1e-6 of
//    that scale (observed ~2e-7, printed by rank 0), while every planted mistake is off by O(1);
//  - gradients accumulate: two backward calls give twice the dense gradient;
//  - traffic: forward and backward each send exactly one all_reduce of N·C floats,
//    2(t-1)/t·4NC bytes per rank (tp.stats()), and nothing else;
//  - a second shape (N, C, F) = (3, 4, 36) on a tp group cut from the world with its ranks in
//    reverse order (group rank != world rank), so hard-coded shapes or the world's rank fail.
// Shapes (6, 8, 48): F/t = 48, 24, 16, 12 is never N or C, so a transposed or mis-sliced operand
// does not fit by accident; values are random (not symmetric), so a wrong slice gives wrong sums.
//
// Glossary: t ranks in the tp group, r this rank, N rows, C channels, F hidden width, Fs = F/t.
#include "labs/tensor_parallel_mlp/tensor_parallel_mlp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace llmp {
namespace {

constexpr double kRelTol = 1e-5;

double gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double gelu_grad(double x) {
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

Tensor tensor(std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32, MemCategory::kParameters);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>(v[i]);
  return t;
}
// Columns [j0, j0 + w) of a row-major (rows, cols) matrix.
std::vector<double> columns(const std::vector<double>& m, int rows, int cols, int j0, int w) {
  std::vector<double> out;
  for (int i = 0; i < rows; ++i)
    out.insert(out.end(), m.begin() + i * cols + j0, m.begin() + i * cols + j0 + w);
  return out;
}
std::vector<double> part(const std::vector<double>& v, int begin, int count) {
  return std::vector<double>(v.begin() + begin, v.begin() + begin + count);
}

// Rank r's shard of the dense MLP's parameters, gradients zero.
TpMlpShard shard_of(const DenseMlp& d, int t, int r) {
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
double g_worst = 0;  // largest relative difference seen in a passing comparison (printed)
std::string off(const char* what, const Tensor& got, std::vector<int64_t> shape,
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

class TensorParallelMlp : public ::testing::Test {
 protected:
  void SetUp() override {
    tp = ProcessGroup::world();  // a fresh group: its CommStats start at zero
    t = tp->size(), r = tp->rank();
    shard = shard_of(dense, t, r);
    x = tensor({dense.N, dense.C}, dense.x), dy = tensor({dense.N, dense.C}, dense.dy);
  }
  void TearDown() override {
    if (r == 0 && g_worst > 0)
      std::printf("t = %d: largest difference from the dense MLP, relative to its tensor's "
                  "largest element: %.2g (bound %g)\n",
                  t, g_worst, kRelTol);
    g_worst = 0;
  }

  // The shard's gradients are k times their slices of the dense gradients.
  void expect_shard_gradients(double k, const char* when) {
    const int C = dense.C, F = dense.F, Fs = F / t;
    EXPECT_CLOSE(off("dw_fc", shard.dw_fc, {C, Fs}, columns(dense.dW_fc, C, F, r * Fs, Fs), k))
        << when << "; want columns [" << r * Fs << ", " << (r + 1) * Fs << ") of the dense dW_fc";
    EXPECT_CLOSE(off("db_fc", shard.db_fc, {Fs}, part(dense.db_fc, r * Fs, Fs), k)) << when;
    EXPECT_CLOSE(off("dw_proj", shard.dw_proj, {Fs, C}, part(dense.dW_proj, r * Fs * C, Fs * C), k))
        << when << "; want rows [" << r * Fs << ", " << (r + 1) * Fs << ") of the dense dW_proj";
    EXPECT_CLOSE(off("db_proj", shard.db_proj, {C}, dense.db_proj, k))
        << when << "; b_proj is replicated: every rank holds its full gradient";
  }

  const DenseMlp dense{6, 8, 48, 2019};
  std::shared_ptr<ProcessGroup> tp;
  int t = 1, r = 0;
  TpMlpShard shard;
  TpMlpCache cache;
  Tensor x, dy;
};

TEST_F(TensorParallelMlp, ForwardMatchesTheDenseMlp) {
  Tensor y = tp_mlp_forward(x, shard, cache, *tp);
  EXPECT_CLOSE(off("y", y, {6, 8}, dense.y))
      << "t = " << t << ", rank " << r << ": y = gelu(x @ W_fc + b_fc) @ W_proj + b_proj";
}

TEST_F(TensorParallelMlp, BackwardGivesTheFullDxOnEveryRank) {
  tp_mlp_forward(x, shard, cache, *tp);
  Tensor dx = tp_mlp_backward(dy, x, shard, cache, *tp);
  EXPECT_CLOSE(off("dx", dx, {6, 8}, dense.dx))
      << "t = " << t << ", rank " << r << ": dx must be the full gradient on every rank";
}

TEST_F(TensorParallelMlp, ShardGradientsAreSlicesOfTheDenseGradients) {
  tp_mlp_forward(x, shard, cache, *tp);
  tp_mlp_backward(dy, x, shard, cache, *tp);
  expect_shard_gradients(1.0, "one backward call");
}

TEST_F(TensorParallelMlp, GradientsAccumulateAcrossBackwardCalls) {
  tp_mlp_forward(x, shard, cache, *tp);
  tp_mlp_backward(dy, x, shard, cache, *tp);
  tp_mlp_backward(dy, x, shard, cache, *tp);
  expect_shard_gradients(2.0, "two backward calls must give twice the gradient (+=, not =)");
}

TEST_F(TensorParallelMlp, SendsOneAllReduceOfNCFloatsEachWay) {
  const double want = 2.0 * (t - 1) / t * 4 * dense.N * dense.C;  // 2(t-1)/t·4NC
  const char* pass[] = {"forward", "backward"};
  for (int p = 0; p < 2; ++p) {
    tp->reset_stats();
    if (p == 0) tp_mlp_forward(x, shard, cache, *tp);
    if (p == 1) tp_mlp_backward(dy, x, shard, cache, *tp);
    std::ostringstream ops;
    for (const auto& kv : tp->stats().calls) ops << " " << kv.first << " ×" << kv.second;
    EXPECT_EQ(tp->stats().bytes_of("all_reduce"), want)
        << pass[p] << ", t = " << t
        << ": bytes of all_reduce, want 2(t-1)/t·4NC; calls:" << ops.str();
    EXPECT_EQ(tp->stats().total_bytes(), want)
        << pass[p] << ": bytes in all, want one all_reduce of N·C floats only; calls:" << ops.str();
    if (t > 1) {
      EXPECT_EQ(tp->stats().calls.count("all_reduce") ? tp->stats().calls.at("all_reduce") : 0, 1)
          << pass[p] << ": want exactly one all_reduce; calls:" << ops.str();
    }
  }
}

// Another shape, on a tp group cut from the world with its ranks in reverse order: at 4 ranks two
// groups of 2 ({3, 1} and {2, 0}, by world rank), otherwise the whole world reversed.
TEST_F(TensorParallelMlp, AnotherShapeOnASubGroupWithReorderedRanks) {
  const int w = tp->rank();
  auto sub = tp->split(tp->size() >= 4 ? w % 2 : 0, -w);
  const int ts = sub->size(), q = sub->rank(), N = 3, C = 4, F = 36, Fs = F / ts;
  const DenseMlp d(N, C, F, 7);
  TpMlpShard s = shard_of(d, ts, q);
  TpMlpCache c;
  Tensor xs = tensor({N, C}, d.x), dys = tensor({N, C}, d.dy);
  SCOPED_TRACE("(N, C, F) = (3, 4, 36), tp group of " + std::to_string(ts) + ", group rank " +
               std::to_string(q) + " (world rank " + std::to_string(w) + ")");
  EXPECT_CLOSE(off("y", tp_mlp_forward(xs, s, c, *sub), {N, C}, d.y));
  EXPECT_CLOSE(off("dx", tp_mlp_backward(dys, xs, s, c, *sub), {N, C}, d.dx));
  EXPECT_CLOSE(off("dw_fc", s.dw_fc, {C, Fs}, columns(d.dW_fc, C, F, q * Fs, Fs)));
  EXPECT_CLOSE(off("dw_proj", s.dw_proj, {Fs, C}, part(d.dW_proj, q * Fs * C, Fs * C)));
  EXPECT_EQ(tp->stats().bytes_of("all_reduce"), 0.0)
      << "the world group was used, not the tp group passed";
}

}  // namespace
}  // namespace llmp
