// The 2D / 2.5D layout's bookkeeping over one depth layer's q×q grid, rank by rank in one process
// (no communication): the parts of the q² ranks cover every element of the model, copy_to_full
// inverts copy_from_full, and counts_once (what --clip_grad sums over the grid; the strategy
// counts depth layer 0 only) picks every element exactly once: a vector block counted on every
// row of its column group, or on none, is a named element counted q or 0 times.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/testing/ownership_tally.h"
#include "common/tp2d/layout_2p5d.h"

namespace llmp {
namespace {

TEST(Layout2p5d, EveryElementHeldAndCountedOnce) {
  for (int q : {1, 2, 3}) {
    const GPTConfig cfg = testing::grid_test_model(q);
    testing::OwnershipTally tally(cfg);
    for (int i = 0; i < q; ++i)
      for (int j = 0; j < q; ++j) {
        const Layout2p5d lay(cfg, q, i, j);
        std::vector<std::pair<int64_t, int64_t>> counted;
        for (const Part2p5d& p : lay.parts())
          if (lay.counts_once(p)) counted.emplace_back(p.offset, p.numel());
        tally.add_rank(lay.num_params(), counted,
                       [&](const float* local, float* full) { lay.copy_to_full(local, full); });
      }
    const int64_t replicated = tally.expect_each_counted_once("q=" + std::to_string(q));
    if (q > 1) {
      EXPECT_GT(replicated, 0);  // the vectors, held by q ranks each
    }
  }
}

TEST(Layout2p5d, CopyToFullInvertsCopyFromFull) {
  const int q = 2;
  const GPTConfig cfg = testing::grid_test_model(q);
  const int64_t psi = GPTLayout(cfg).num_params();
  std::vector<float> full(psi), back(psi, -1.f);
  for (int64_t e = 0; e < psi; ++e) full[e] = static_cast<float>(e);
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < q; ++j) {
      const Layout2p5d lay(cfg, q, i, j);
      std::vector<float> local(lay.num_params());
      lay.copy_from_full(full.data(), local.data());
      lay.copy_to_full(local.data(), back.data());
    }
  EXPECT_EQ(back, full);
}

}  // namespace
}  // namespace llmp
