// Lab sequence_parallel_mlp: the tests. They reach the code only through sequence_parallel_mlp.h,
// so this one file checks both the reference (reference_test, 1..4 ranks, in CI) and your
// starter.cc (student_test, 2..4 ranks: bazel test //labs/sequence_parallel_mlp:student_test).
//
// Every rank computes the dense MLP in double (labs/tensor_parallel_mlp/dense_mlp.h: the same
// one the tensor-parallel lab is checked against), cuts its shard and its rows out of it, and runs
// sp_mlp_forward / sp_mlp_backward. What is checked:
//  - y_s and dx_s are this rank's rows of the dense y and dx, each shard gradient its slice of the
//    dense gradient, db_proj the sum of this rank's rows of dy (and over the ranks the dense
//    db_proj), within kRelTol of the tensor's largest element; two backwards give twice;
//  - traffic: forward one all_gather and one reduce_scatter of N·C floats, backward two
//    all_gathers and one reduce_scatter, each (t−1)/t·4NC bytes per rank, and no all_reduce;
//  - memory: after the forward, this call holds exactly y_s and the cache (h, a) more than before,
//    4·(Nl·C + 2·N·Fs) bytes (MemoryTracker): the gathered x is not kept;
//  - another shape on a group cut from the world with its ranks in reverse order.
// Shapes (12, 8, 60): Nl = 12, 6, 4, 3 and Fs = 60, 30, 20, 15 are never each other, N or C, so a
// transposed or mis-sliced operand does not fit by accident.
//
// Glossary: t ranks, r this rank, N rows, Nl = N/t, C channels, F hidden width, Fs = F/t.
#include "labs/sequence_parallel_mlp/sequence_parallel_mlp.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor/memory.h"
#include "labs/tensor_parallel_mlp/dense_mlp.h"

namespace llmp {
namespace {

// Σ over rows [n0, n0 + n) of a row-major (rows, C) matrix.
std::vector<double> row_sum(const std::vector<double>& m, int C, int n0, int n) {
  std::vector<double> s(C, 0.0);
  for (int i = n0; i < n0 + n; ++i)
    for (int c = 0; c < C; ++c) s[c] += m[i * C + c];
  return s;
}

class SequenceParallelMlp : public ::testing::Test {
 protected:
  void SetUp() override {
    tp = ProcessGroup::world();       // a fresh group: its CommStats start at zero
    checker = ProcessGroup::world();  // the tests' own collectives
    t = tp->size(), r = tp->rank(), Nl = dense.N / t;
    shard = shard_of(dense, t, r);
    x_s = tensor({Nl, dense.C}, part(dense.x, r * Nl * dense.C, Nl * dense.C));
    dy_s = tensor({Nl, dense.C}, part(dense.dy, r * Nl * dense.C, Nl * dense.C));
  }
  void TearDown() override {
    if (r == 0 && g_worst > 0)
      std::printf("t = %d: largest difference from the dense MLP, relative to its tensor's "
                  "largest element: %.2g (bound %g)\n",
                  t, g_worst, kRelTol);
    g_worst = 0;
  }
  std::vector<double> my_rows(const std::vector<double>& m) const {
    return part(m, r * Nl * dense.C, Nl * dense.C);
  }
  void expect_shard_gradients(double k, const char* when) {
    const int C = dense.C, F = dense.F, Fs = F / t;
    EXPECT_CLOSE(off("dw_fc", shard.dw_fc, {C, Fs}, columns(dense.dW_fc, C, F, r * Fs, Fs), k))
        << when;
    EXPECT_CLOSE(off("db_fc", shard.db_fc, {Fs}, part(dense.db_fc, r * Fs, Fs), k)) << when;
    EXPECT_CLOSE(off("dw_proj", shard.dw_proj, {Fs, C}, part(dense.dW_proj, r * Fs * C, Fs * C),
                     k))
        << when;
    EXPECT_CLOSE(off("db_proj", shard.db_proj, {C}, row_sum(dense.dy, C, r * Nl, Nl), k))
        << when << "; want the sum of this rank's rows of dy";
  }

  const DenseMlp dense{12, 8, 60, 2022};
  std::shared_ptr<ProcessGroup> tp, checker;
  int t = 1, r = 0, Nl = 12;
  TpMlpShard shard;
  TpMlpCache cache;
  Tensor x_s, dy_s;
};

TEST_F(SequenceParallelMlp, ForwardGivesThisRanksRowsOfTheDenseMlp) {
  Tensor y_s = sp_mlp_forward(x_s, shard, cache, *tp);
  EXPECT_CLOSE(off("y_s", y_s, {Nl, dense.C}, my_rows(dense.y)))
      << "t = " << t << ", rank " << r << ": rows [" << r * Nl << ", " << (r + 1) * Nl
      << ") of y = gelu(x @ W_fc + b_fc) @ W_proj + b_proj";
}

TEST_F(SequenceParallelMlp, BackwardGivesThisRanksRowsOfDxAndTheShardGradients) {
  sp_mlp_forward(x_s, shard, cache, *tp);
  Tensor dx_s = sp_mlp_backward(dy_s, x_s, shard, cache, *tp);
  EXPECT_CLOSE(off("dx_s", dx_s, {Nl, dense.C}, my_rows(dense.dx)))
      << "t = " << t << ", rank " << r << ": rows [" << r * Nl << ", " << (r + 1) * Nl
      << ") of the full dx";
  expect_shard_gradients(1.0, "one backward call");
  Tensor sum = tensor({dense.C}, std::vector<double>(dense.C, 0.0));
  if (shard.db_proj.numel() == dense.C) sum.copy_from(shard.db_proj);
  checker->all_reduce(sum);
  EXPECT_CLOSE(off("db_proj summed over the ranks", sum, {dense.C}, dense.db_proj));
}

TEST_F(SequenceParallelMlp, GradientsAccumulateAcrossBackwardCalls) {
  sp_mlp_forward(x_s, shard, cache, *tp);
  sp_mlp_backward(dy_s, x_s, shard, cache, *tp);
  sp_mlp_backward(dy_s, x_s, shard, cache, *tp);
  expect_shard_gradients(2.0, "two backward calls must give twice the gradient (+=, not =)");
}

TEST_F(SequenceParallelMlp, AllGatherAndReduceScatterInsteadOfAllReduce) {
  const double each = double(t - 1) / t * (4.0 * dense.N * dense.C);  // (t-1)/t·4NC
  tp->reset_stats();
  sp_mlp_forward(x_s, shard, cache, *tp);
  EXPECT_DOUBLE_EQ(tp->stats().bytes_of("all_gather"), each)
      << "forward; calls:" << tp->stats().calls_str();
  EXPECT_DOUBLE_EQ(tp->stats().bytes_of("reduce_scatter"), each)
      << "forward; calls:" << tp->stats().calls_str();
  EXPECT_DOUBLE_EQ(tp->stats().total_bytes(), 2 * each)
      << "forward: the bytes of one all_reduce of N·C floats, in two halves; calls:"
      << tp->stats().calls_str();
  EXPECT_EQ(tp->stats().calls_of("all_gather"), 1) << "forward; calls:" << tp->stats().calls_str();
  EXPECT_EQ(tp->stats().calls_of("reduce_scatter"), 1)
      << "forward; calls:" << tp->stats().calls_str();
  EXPECT_EQ(tp->stats().calls.size(), 2u) << "forward; calls:" << tp->stats().calls_str();
  tp->reset_stats();
  sp_mlp_backward(dy_s, x_s, shard, cache, *tp);
  EXPECT_DOUBLE_EQ(tp->stats().bytes_of("all_gather"), 2 * each)
      << "backward: dy and x gathered; calls:" << tp->stats().calls_str();
  EXPECT_DOUBLE_EQ(tp->stats().bytes_of("reduce_scatter"), each)
      << "backward; calls:" << tp->stats().calls_str();
  EXPECT_DOUBLE_EQ(tp->stats().total_bytes(), 3 * each)
      << "backward; calls:" << tp->stats().calls_str();
  EXPECT_EQ(tp->stats().calls_of("all_gather"), 2) << "backward; calls:" << tp->stats().calls_str();
  EXPECT_EQ(tp->stats().calls_of("reduce_scatter"), 1)
      << "backward; calls:" << tp->stats().calls_str();
  EXPECT_EQ(tp->stats().calls.size(), 2u) << "backward; calls:" << tp->stats().calls_str();
}

TEST_F(SequenceParallelMlp, ForwardKeepsOnlyItsRowsOutputAndTheCache) {
  MemoryTracker& mt = MemoryTracker::instance();
  const int64_t before = mt.current_total();
  Tensor y_s = sp_mlp_forward(x_s, shard, cache, *tp);
  const int64_t held = mt.current_total() - before, Fs = dense.F / t;
  const int64_t want = 4 * (int64_t{Nl} * dense.C + 2 * int64_t{dense.N} * Fs);
  EXPECT_EQ(held, want) << "t = " << t << ": bytes alive after the forward, beyond those before; "
                        << "want y_s (Nl·C) and cache.h, cache.a (N·Fs each) only, 4·("
                        << Nl * dense.C << " + 2·" << dense.N * Fs << "); the gathered x (N·C = "
                        << dense.N * dense.C << " floats) must not be kept";
}

// Another shape, on a group cut from the world with its ranks in reverse order: at 4 ranks two
// groups of 2 ({3, 1} and {2, 0}, by world rank), otherwise the whole world reversed.
TEST_F(SequenceParallelMlp, AnotherShapeOnASubGroupWithReorderedRanks) {
  const int w = tp->rank();
  auto sub = tp->split(tp->size() >= 4 ? w % 2 : 0, -w);
  const int ts = sub->size(), q = sub->rank(), N = 6 * ts, C = 4, F = 36, Fs = F / ts, n = 6;
  const DenseMlp d(N, C, F, 7);
  TpMlpShard s = shard_of(d, ts, q);
  TpMlpCache c;
  Tensor xs = tensor({n, C}, part(d.x, q * n * C, n * C));
  Tensor dys = tensor({n, C}, part(d.dy, q * n * C, n * C));
  SCOPED_TRACE("(N, C, F) = (" + std::to_string(N) + ", 4, 36), group of " + std::to_string(ts) +
               ", group rank " + std::to_string(q) + " (world rank " + std::to_string(w) + ")");
  EXPECT_CLOSE(off("y_s", sp_mlp_forward(xs, s, c, *sub), {n, C}, part(d.y, q * n * C, n * C)));
  EXPECT_CLOSE(
      off("dx_s", sp_mlp_backward(dys, xs, s, c, *sub), {n, C}, part(d.dx, q * n * C, n * C)));
  EXPECT_CLOSE(off("dw_fc", s.dw_fc, {C, Fs}, columns(d.dW_fc, C, F, q * Fs, Fs)));
  EXPECT_CLOSE(off("dw_proj", s.dw_proj, {Fs, C}, part(d.dW_proj, q * Fs * C, Fs * C)));
  EXPECT_EQ(tp->stats().total_bytes(), 0.0) << "the world group was used, not the group passed";
}

}  // namespace
}  // namespace llmp
