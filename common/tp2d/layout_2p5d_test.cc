// The 2D / 2.5D layout's bookkeeping over one depth layer's q×q grid, rank by rank in one process
// (no communication): the parts of the q² ranks cover every element of the model, copy_to_full
// inverts copy_from_full, and counts_once (what --clip_grad sums over the grid; the strategy
// counts depth layer 0 only) picks every element exactly once: a vector block counted on every
// row of its column group, or on none, is a named element counted q or 0 times.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/tp2d/layout_2p5d.h"

namespace llmp {
namespace {

// The GPT-2 tensor holding element e of the whole model's flat buffer.
std::string tensor_of(const GPTConfig& cfg, int64_t e) {
  const GPTLayout whole(cfg);
  for (const ParamSpec& s : whole.params())
    if (e >= s.global_offset && e < s.global_offset + s.numel)
      return s.name + " element " + std::to_string(e - s.global_offset);
  return "no tensor";
}

GPTConfig model(int q) {
  GPTConfig cfg = GPTConfig::preset("tiny");  // C = 64, V = 256
  cfg.layers = 2;
  cfg.heads = 4;
  if (q == 3) cfg.d = 72, cfg.heads = 6, cfg.vocab = 261;  // q | H, C, 4C, V
  return cfg;
}

TEST(Layout2p5d, EveryElementHeldAndCountedOnce) {
  for (int q : {1, 2, 3}) {
    const GPTConfig cfg = model(q);
    const int64_t psi = GPTLayout(cfg).num_params();
    std::vector<int> held(psi, 0), counted(psi, 0);
    for (int i = 0; i < q; ++i)
      for (int j = 0; j < q; ++j) {
        const Layout2p5d lay(cfg, q, i, j);
        std::vector<float> ones(lay.num_params(), 1.f), mine(lay.num_params(), 0.f);
        for (const Part2p5d& p : lay.parts())
          if (lay.counts_once(p)) std::fill_n(mine.begin() + p.offset, p.numel(), 1.f);
        std::vector<float> h(psi, 0.f), c(psi, 0.f);
        lay.copy_to_full(ones.data(), h.data());
        lay.copy_to_full(mine.data(), c.data());
        for (int64_t e = 0; e < psi; ++e) held[e] += h[e] != 0, counted[e] += c[e] != 0;
      }
    int64_t wrong = 0, replicated = 0;
    for (int64_t e = 0; e < psi; ++e) {
      if (held[e] == 0) ADD_FAILURE() << "q=" << q << ": " << tensor_of(cfg, e) << " held by no rank";
      if (counted[e] != 1 && wrong++ < 5)
        ADD_FAILURE() << "q=" << q << ": " << tensor_of(cfg, e) << " counted " << counted[e]
                      << " times over the grid";
      replicated += held[e] > 1;
    }
    EXPECT_EQ(wrong, 0) << "q=" << q;
    if (q > 1) EXPECT_GT(replicated, 0);  // the vectors, held by q ranks each
    std::printf("q=%d: %lld elements, %lld held by more than one rank, each counted once\n", q,
                static_cast<long long>(psi), static_cast<long long>(replicated));
  }
}

TEST(Layout2p5d, CopyToFullInvertsCopyFromFull) {
  const int q = 2;
  const GPTConfig cfg = model(q);
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
