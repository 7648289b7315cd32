// The recomputation checks of a stage with its own walk (see recompute_check.h).
#include "tests/recompute_check.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "common/train/report.h"
#include "tests/stage_test_util.h"

namespace llmp {

void expect_recomputation_bit_identical(const GPTConfig& config, const RecomputeTrainer& train,
                                        const std::vector<std::string>& groups, bool sends) {
  const int L = config.layers;
  const RecomputeRun none = train(config);
  EXPECT_EQ(none.meter.recomputed_blocks, 0);
  EXPECT_EQ(none.meter.recomputed_probs, 0);
  struct Policy {
    Recompute mode;
    int every;
  };
  for (const Policy& p : {Policy{Recompute::kSelective, 1}, Policy{Recompute::kFull, 1},
                          Policy{Recompute::kFull, 2}, Policy{Recompute::kFull, 3}}) {
    const std::string name = std::string("--recompute ") + to_string(p.mode) +
                             (p.every > 1 ? " --recompute_every " + std::to_string(p.every) : "");
    SCOPED_TRACE(name);
    GPTConfig c = config;
    c.recompute = p.mode;
    c.recompute_every = p.every;
    const RecomputeRun run = train(c);
    EXPECT_EQ(run.losses, none.losses) << "recomputation changed a loss";
    EXPECT_TRUE(run.state == none.state) << "recomputation changed the state";
    const bool full = p.mode == Recompute::kFull;
    EXPECT_EQ(run.meter.recomputed_blocks, full ? L : 0) << "block forwards run again per step";
    EXPECT_EQ(run.meter.recomputed_probs, full ? 0 : L) << "P made again per step";
    for (const ReportRow& r : run.rows) {
      if (test_world().rank() == 0)
        std::printf("P=%d %s: %-36s measured %.0f formula %.0f (%s)\n", test_world().size(),
                    name.c_str(), r.what.c_str(), r.measured, r.formula, r.formula_text.c_str());
      EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                    << r.formula << " (" << r.formula_text << ")";
    }
    EXPECT_GT(report_row(run.rows, "recomputed forward FLOPs per step").measured, 0);
    EXPECT_LT(report_row(run.rows, "activations per block").measured,
              report_row(none.rows, "activations per block").measured);
    for (const std::string& group : groups) {
      const double with = report_row(run.rows, group).measured,
                   without = report_row(none.rows, group).measured;
      if (full && sends)
        EXPECT_GT(with, without) << group << ": the recomputed forwards' collectives";
      else
        EXPECT_EQ(with, without) << group;
    }
  }
}

}  // namespace llmp
