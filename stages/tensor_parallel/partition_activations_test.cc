// ZeRO-R's Pa (Rajbhandari et al. 2020, §6.1) on Megatron tensor parallelism: with full
// recomputation each kept block input is split over the tensor-parallel group (a rank keeps 1/t)
// and all-gathered right before its recomputation. Checked here: the trained state is bit for bit
// that of no recomputation; the checkpoint bytes a rank keeps per block, measured by the
// MemoryTracker, are 1/t of full recomputation's; the extra all_gather bytes, counted by the
// checkpoint group's CommStats, are ⌈L/k⌉·(t-1)/t·4BTC per step; f/g's traffic is that of full
// recomputation, which runs each block's two g all_reduces again (4L·(t-1)/t·4BTC more than none).
//
// Glossary: t tensor-parallel ranks, B batch, T sequence, C channels, L blocks, k blocks per
// checkpointed segment.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/tp/tp_strategy.h"
#include "common/train/report.h"
#include "tests/stage_test_util.h"
#include "tests/tp_test_util.h"

namespace llmp {
namespace {

struct Trained {
  std::vector<float> params;
  std::vector<ReportRow> rows;
  double checkpoint_bytes = 0, tp_bytes = 0, block_bytes = 0;
};

Trained train(Recompute policy, int every, bool pa, int B = 8, int steps = 3) {
  GPTConfig cfg = tiny_h4();
  cfg.layers = 4;
  cfg.recompute = policy;
  cfg.recompute_every = every;
  cfg.partition_checkpoints = pa;
  TensorParallelStrategy s(cfg, test_world(), AdamWConfig{}, 21);
  train_steps(s, B, steps, 9);
  const int64_t psi = GPTLayout(cfg).num_params();
  Trained t;
  t.params.resize(psi);
  std::vector<float> m(psi), v(psi);
  s.get_state(t.params.data(), m.data(), v.data());
  t.rows = s.report();
  t.checkpoint_bytes = s.last_step_checkpoint_bytes();
  t.tp_bytes = s.last_step_tp_bytes();
  t.block_bytes = s.last_block_activation_bytes();
  return t;
}

TEST(PartitionActivations, BitIdenticalWithAQuarterOfTheCheckpointsAndMeasuredGathers) {
  const int t = test_world().size(), B = 8, T = tiny_h4().ctx, C = tiny_h4().d, L = 4;
  const Trained none = train(Recompute::kNone, 1, false);
  for (int every : {1, 2}) {
    const Trained full = train(Recompute::kFull, every, false);
    const Trained pa = train(Recompute::kFull, every, true);
    EXPECT_EQ(full.params, none.params) << "full recomputation, every " << every;
    EXPECT_EQ(pa.params, none.params) << "Pa, every " << every;
    const double segments = std::ceil(double(L) / every);
    const double gathered = segments * (t - 1.0) / t * 4.0 * B * T * C;
    std::printf("t=%d every %d: kept per block %.1f bytes (full %.1f); Pa all_gather %.0f bytes "
                "(formula %.0f); tp group %.0f bytes (none %.0f)\n",
                t, every, pa.block_bytes, full.block_bytes, pa.checkpoint_bytes, gathered,
                pa.tp_bytes, none.tp_bytes);
    EXPECT_DOUBLE_EQ(pa.block_bytes * t, full.block_bytes) << "a rank keeps 1/t of each input";
    EXPECT_DOUBLE_EQ(full.block_bytes, segments / L * 4.0 * B * T * C);
    EXPECT_EQ(pa.checkpoint_bytes, gathered);
    EXPECT_EQ(full.checkpoint_bytes, 0) << "no Pa, no all_gather";
    EXPECT_EQ(pa.tp_bytes, full.tp_bytes) << "Pa adds nothing to f and g";
    EXPECT_EQ(full.tp_bytes - none.tp_bytes, 4.0 * L * (t - 1) / t * 4.0 * B * T * C)
        << "recomputation runs each block's two g all_reduces again";
    for (const ReportRow& r : pa.rows) EXPECT_TRUE(report_row_ok(r)) << r.what;
    const ReportRow& row = report_row(pa.rows, "sent per step (Pa all_gather)");
    EXPECT_EQ(row.measured, gathered);
  }
}

}  // namespace
}  // namespace llmp
