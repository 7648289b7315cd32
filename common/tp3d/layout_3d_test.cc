// The 3D layout's bookkeeping over a whole cube, rank by rank in one process (no communication):
// the blocks of the q³ ranks cover every element of the model, copy_from_full and copy_to_full
// are inverse, and counts_once (what --clip_grad sums over the cube) picks every element exactly
// once. A rank counting the wrong replica of a layout-B bias (one block twice, its neighbour
// never) changes tiny's gradient norm by 2e-5, below what clip_grad_test can see: here it is a
// named element counted 2 or 0 times.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/testing/ownership_tally.h"
#include "common/tp3d/layout_3d.h"

namespace llmp {
namespace {

TEST(Layout3d, EveryElementHeldAndCountedOnce) {
  for (int q : {1, 2, 3}) {
    const GPTConfig cfg = testing::grid_test_model(q);
    testing::OwnershipTally tally(cfg);
    for (int i = 0; i < q; ++i)
      for (int j = 0; j < q; ++j)
        for (int l = 0; l < q; ++l) {
          const Layout3d lay(cfg, q, i, j, l);
          std::vector<std::pair<int64_t, int64_t>> counted;
          for (const Param3d& p : lay.params())
            if (lay.counts_once(p)) counted.emplace_back(p.offset, p.numel);
          tally.add_rank(lay.num_params(), counted,
                         [&](const float* local, float* full) { lay.copy_to_full(local, full); });
        }
    const int64_t replicated = tally.expect_each_counted_once("q=" + std::to_string(q));
    if (q > 1) {
      EXPECT_GT(replicated, 0);  // the rule had replicas to choose among: the vectors
    }
  }
}

TEST(Layout3d, CopyToFullInvertsCopyFromFull) {
  const int q = 2;
  const GPTConfig cfg = testing::grid_test_model(q);
  const int64_t psi = GPTLayout(cfg).num_params();
  std::vector<float> full(psi), back(psi, -1.f);
  for (int64_t e = 0; e < psi; ++e) full[e] = static_cast<float>(e);
  for (int r = 0; r < q * q * q; ++r) {
    const Layout3d lay(cfg, q, r / (q * q), (r / q) % q, r % q);
    std::vector<float> local(lay.num_params());
    lay.copy_from_full(full.data(), local.data());
    lay.copy_to_full(local.data(), back.data());
  }
  EXPECT_EQ(back, full);
}

}  // namespace
}  // namespace llmp
