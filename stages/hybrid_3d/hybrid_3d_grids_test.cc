// The hybrid_3d stage on 4 ranks: the grids with one dimension of size 1 — (dp, pp, tp) =
// (1, 2, 2), (2, 1, 2), (2, 2, 1) — and (1, 1, 4) against the single-rank baseline, and the rows
// of a grid without a pipeline. The 8-rank grid is hybrid_3d_test.
//
// tiny: V = 256, ctx = T = 16, L = 2, C = 32, H = 2 (so tp = 4 uses H = 4, the test's override).
#include <gtest/gtest.h>

#include "stages/hybrid_3d/hybrid_3d.h"
#include "stages/hybrid_3d/hybrid_3d_test_util.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

void expect_grid_matches(GridShape g, int m, bool sp = false, int heads = 0) {
  HybridOptions o;
  o.micro_batches = m, o.sequence_parallel = sp;
  EquivalenceConfig c = hybrid_equivalence_config();
  c.heads = heads;
  SCOPED_TRACE("dp " + std::to_string(g.dp) + " × pp " + std::to_string(g.pp) + " × tp " +
               std::to_string(g.tp) + ", m " + std::to_string(m) + (sp ? ", SP" : ""));
  expect_equivalent(run_against_baseline(hybrid_factory(g, o), test_world(), c), 1e-5);
}

TEST(Hybrid3DGrids, PipelineAndTensorParallelMatchTheBaseline) { expect_grid_matches({1, 2, 2}, 3); }

TEST(Hybrid3DGrids, DataAndTensorParallelMatchTheBaseline) {
  expect_grid_matches({2, 1, 2}, 3, /*sp=*/true);
}

TEST(Hybrid3DGrids, DataAndPipelineParallelMatchTheBaseline) { expect_grid_matches({2, 2, 1}, 3); }

TEST(Hybrid3DGrids, TensorParallelAloneMatchesTheBaseline) {
  expect_grid_matches({1, 1, 4}, 1, /*sp=*/false, /*heads=*/4);
}

}  // namespace
}  // namespace llmp
