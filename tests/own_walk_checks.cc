// The checks of a stage with its own walk (see own_walk_checks.h).
#include "tests/own_walk_checks.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>

#include "common/comm/grid.h"
#include "common/train/recompute_report.h"
#include "common/train/report.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {

WalkRun finish_walk_run(Strategy& s, const GPTConfig& config, int global_batch, int T,
                                  std::vector<double> losses) {
  WalkRun r;
  r.losses = std::move(losses);
  r.meter = RecomputeMeter::instance();
  const int64_t psi = GPT(config).layout().num_params();
  r.state.resize(3 * psi);
  s.get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  r.rows = s.report();
  for (ReportRow& row : recompute_rows(config, GridShape{1, 1, test_world().size()},
                                       global_batch, T, 4, r.meter))
    r.rows.push_back(std::move(row));
  return r;
}

void expect_recomputation_bit_identical(const GPTConfig& config, const WalkTrainer& train,
                                        const std::vector<std::string>& groups, bool sends) {
  const int L = config.layers;
  const WalkRun none = train(config);
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
    const WalkRun run = train(c);
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

void expect_flash_matches_materialized(const GPTConfig& config, const WalkTrainer& train,
                                       const std::vector<std::string>& groups) {
  const WalkRun materialized = train(config);
  for (const Recompute policy : {Recompute::kNone, Recompute::kFull}) {
    SCOPED_TRACE(std::string("--attention flash --recompute ") + to_string(policy));
    GPTConfig c = config;
    c.attention = AttentionMethod::kFlash;
    c.recompute = policy;
    const WalkRun flash = train(c);
    ASSERT_EQ(flash.losses.size(), materialized.losses.size());
    for (size_t k = 0; k < flash.losses.size(); ++k)
      EXPECT_NEAR(flash.losses[k], materialized.losses[k], 1e-6 * materialized.losses[k])
          << "step " << k + 1;
    const int64_t n = static_cast<int64_t>(flash.state.size()) / 3;  // the parameters
    const double d = max_rel_diff(flash.state.data(), materialized.state.data(), n);
    if (test_world().rank() == 0)
      std::printf("P=%d flash, recompute %s: parameters max rel %.2e from materialized\n",
                  test_world().size(), to_string(policy), d);
    EXPECT_LE(d, 1e-5);
    for (const ReportRow& r : flash.rows)
      EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                    << r.formula << " (" << r.formula_text << ")";
    EXPECT_LT(report_row(flash.rows, "activations per block").measured,
              report_row(materialized.rows, "activations per block").measured);
    if (policy == Recompute::kNone) {
      for (const std::string& group : groups) {
        EXPECT_EQ(report_row(flash.rows, group).measured,
                  report_row(materialized.rows, group).measured)
            << group;
      }
    }
  }
}

}  // namespace llmp
