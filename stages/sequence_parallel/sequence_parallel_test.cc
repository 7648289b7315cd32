// Megatron sequence parallelism (common/tp/tp_strategy.h with sequence_parallel on) against the
// single-rank baseline, and against tensor parallelism measured in the same process: the same
// bytes over the tensor-parallel group (every all_reduce became a reduce_scatter plus an
// all_gather), fewer activation bytes per block by exactly the replicated part divided by t, and
// the two extra terms (the backward re-gather, the replicated gradients' all_reduce) against their
// closed forms (common/plan/tp_formulas.h). Run on 1, 2 and 4 ranks (t = the world size).
//
// Glossary: t tensor-parallel ranks, s = T sequence, b = B batch, h = C channels, a = H heads.
#include "common/tp/tp_strategy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/plan/tp_formulas.h"
#include "common/train/report.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"
#include "tests/tp_test_util.h"

namespace llmp {
namespace {

TEST(SequenceParallel, MatchesBaselineWithNonDefaultHyperparameters) {
  EquivalenceConfig cfg;
  cfg.heads = 4;
  cfg.opt.lr = 2e-3f;
  cfg.opt.weight_decay = 0.1f;
  expect_equivalent(run_against_baseline(tensor_parallel_on_world(true), test_world(), cfg),
                    /*max_rel=*/1e-5);
}

/// What one step of a fresh strategy measured: its figures and the tp group's bytes per op.
struct StepFigures {
  double tp_bytes = 0, regather = 0, grad_sync = 0;
  int64_t block_bytes = 0;
  std::map<std::string, double> by_op;  // the tp group's bytes in the last step, per operation
  std::vector<ReportRow> rows;
};

StepFigures two_steps(bool sequence_parallel, int B) {
  const GPTConfig c = tiny_h4();
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", c.ctx);
  const int T = c.ctx;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  TensorParallelStrategy s(c, test_world(), AdamWConfig{}, 7, sequence_parallel);
  StepFigures f;
  for (int k = 1; k <= 2; ++k) {
    sample(corpus.train(), 7, k, 0, B, T, tok.data(), tgt.data());
    const CommStats before = test_world().stats();
    s.train_step(tok.data(), tgt.data(), B, T, k);
    for (const auto& kv : test_world().stats().bytes) {
      auto it = before.bytes.find(kv.first);
      f.by_op[kv.first] = kv.second - (it == before.bytes.end() ? 0.0 : it->second);
    }
  }
  f.tp_bytes = s.last_step_tp_bytes();
  f.regather = s.last_step_regather_bytes();
  f.grad_sync = s.last_step_grad_sync_bytes();
  f.block_bytes = s.last_block_activation_bytes();
  f.rows = s.report();
  return f;
}

TEST(SequenceParallel, SameBytesAsTensorParallelFewerActivations) {
  const GPTConfig c = tiny_h4();
  const TpModelDims d{c.vocab, c.ctx, c.layers, c.d, c.heads};
  const int t = test_world().size(), B = 12, T = c.ctx;
  const StepFigures tp = two_steps(false, B), sp = two_steps(true, B);
  auto op = [](const StepFigures& f, const char* name) {
    auto it = f.by_op.find(name);
    return it == f.by_op.end() ? 0.0 : it->second;
  };
  const double ce = 2.0 * (t - 1) / t * 4.0 * 3 * B * T;  // the cross-entropy's all_reduces
  std::printf("t=%d  tp: all_reduce %.0f | sp: all_reduce %.0f reduce_scatter %.0f all_gather %.0f"
              " | re-gather %.0f, replicated grads %.0f\n",
              t, op(tp, "all_reduce"), op(sp, "all_reduce"), op(sp, "reduce_scatter"),
              op(sp, "all_gather"), sp.regather, sp.grad_sync);
  // Measured against measured: the tensor-parallel group carries the same bytes ...
  EXPECT_EQ(sp.tp_bytes, tp.tp_bytes);
  EXPECT_EQ(sp.tp_bytes, tp_bytes_per_step(d, B, T, t));
  // ... because each activation all_reduce became a reduce_scatter and an all_gather of it.
  EXPECT_EQ(op(sp, "all_reduce"), ce) << "only the cross-entropy's reductions stay all_reduces";
  EXPECT_EQ(op(sp, "reduce_scatter"), op(sp, "all_gather"));
  EXPECT_EQ(op(sp, "reduce_scatter") + op(sp, "all_gather"), op(tp, "all_reduce") - ce);
  // The two terms sequence parallelism adds, each on a group of its own.
  EXPECT_EQ(sp.regather, sp_regather_bytes_per_step(d, B, T, t));
  EXPECT_EQ(sp.grad_sync, sp_replicated_grad_bytes_per_step(d, t));
  EXPECT_EQ(tp.regather + tp.grad_sync, 0.0) << "plain tensor parallelism sends neither";

  // Activations per block: the replicated part (x, ln_1(x), res1, ln_2(res1) and the LayerNorm
  // statistics: 16sbh + 16sb bytes, the paper's 10sbh) divided by t.
  const double s_ = T, b = B, h = c.d;
  std::printf("t=%d  activations per block: tp %lld, sp %lld bytes\n", t,
              static_cast<long long>(tp.block_bytes), static_cast<long long>(sp.block_bytes));
  EXPECT_EQ(tp.block_bytes - sp.block_bytes, (16 * s_ * b * h + 16 * s_ * b) * (1.0 - 1.0 / t));
  EXPECT_EQ(sp.block_bytes, tp_activation_bytes_per_block(d, B, T, t, true));
  for (const ReportRow& r : sp.rows) EXPECT_TRUE(report_row_ok(r)) << r.what;
}

TEST(SequenceParallel, ReplicatedParametersStayIdenticalOnEveryRank) {
  // Each rank's gradients of the LayerNorms, wpe and the row-parallel biases cover only its rows
  // of the sequence: without their all_reduce the copies would drift apart.
  TensorParallelStrategy s(tiny_h4(), test_world(), AdamWConfig{}, 3, /*sequence_parallel=*/true);
  train_steps(s, /*B=*/12, /*steps=*/3, /*seed=*/5);
  EXPECT_GT(expect_replicated_params_identical(s), 0);
}

}  // namespace
}  // namespace llmp
