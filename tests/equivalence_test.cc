// The equivalence harness (tests/equivalence.h) fails a stage that diverged to NaN.
//
// Every comparison with NaN is false, so the usual running maximum, d = std::max(d, |a - b|),
// drops a NaN difference and reports 0: a stage whose losses and parameters were all NaN read
// as an exact match of the baseline, and every stage's "within bound" check passed it. Found by
// planting a bug in the pipelines' bf16 path (the 16-bit copy of the tied wte left unset): four
// of the six schedules reported "losses within 0, parameters within 0". The harness now keeps
// the NaN (common/testing/max_or_nan.h). Here the "stage" is the baseline itself with a NaN
// learning rate: step 1's loss is finite, every later loss and every parameter NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "common/testing/max_or_nan.h"
#include "stages/baseline/baseline.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

TEST(Equivalence, StdMaxDropsANanThatMaxOrNanKeeps) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(std::max(0.0, nan), 0.0) << "the trap: NaN compares false";
  EXPECT_TRUE(std::isnan(testing::max_or_nan(0.0, nan)));
  EXPECT_TRUE(std::isnan(testing::max_or_nan(nan, 1.0)));
  EXPECT_EQ(testing::max_or_nan(1.0, 2.0), 2.0);
  EXPECT_EQ(testing::max_or_nan(2.0, -std::numeric_limits<double>::infinity()), 2.0);
}

TEST(Equivalence, AStageThatDivergedToNanIsNotAMatch) {
  EquivalenceConfig cfg;
  cfg.steps = 3;
  const EquivalenceResult r = run_against_baseline(
      [](const GPT& model, AdamWConfig opt, uint64_t seed) -> std::unique_ptr<Strategy> {
        opt.lr = std::numeric_limits<float>::quiet_NaN();
        return std::make_unique<BaselineStrategy>(model, opt, seed);
      },
      test_world(), cfg);
  ASSERT_EQ(r.losses.size(), 3u);
  EXPECT_TRUE(std::isfinite(r.losses[0])) << "step 1 runs on the initial parameters";
  EXPECT_TRUE(std::isnan(r.losses[2]));
  EXPECT_TRUE(std::isnan(r.max_loss_rel)) << r.max_loss_rel;
  EXPECT_TRUE(std::isnan(r.max_param_rel)) << r.max_param_rel;
  EXPECT_FALSE(r.max_loss_rel <= 1e-4) << "a bound check would pass it";
  const GPTLayout layout(equivalence_model(cfg));
  EXPECT_EQ(r.worst_param, layout.params().front().name) << "the first tensor holding a NaN";
}

}  // namespace
}  // namespace llmp
