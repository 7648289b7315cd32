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
#include "labs/tensor_parallel_mlp/dense_mlp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace llmp {
namespace {

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
    const std::string ops = tp->stats().calls_str();
    EXPECT_EQ(tp->stats().bytes_of("all_reduce"), want)
        << pass[p] << ", t = " << t << ": bytes of all_reduce, want 2(t-1)/t·4NC; calls:" << ops;
    EXPECT_EQ(tp->stats().total_bytes(), want)
        << pass[p] << ": bytes in all, want one all_reduce of N·C floats only; calls:" << ops;
    if (t > 1) {
      EXPECT_EQ(tp->stats().calls_of("all_reduce"), 1)
          << pass[p] << ": want exactly one all_reduce; calls:" << ops;
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
