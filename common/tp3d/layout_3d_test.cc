// The 3D layout's bookkeeping over a whole cube, rank by rank in one process (no communication):
// the blocks of the q³ ranks cover every element of the model, copy_from_full and copy_to_full
// are inverse, and counts_once (what --clip_grad sums over the cube) picks every element exactly
// once. A rank counting the wrong replica of a layout-B bias (one block twice, its neighbour
// never) changes tiny's gradient norm by 2e-5, below what clip_grad_test can see: here it is a
// named element counted 2 or 0 times.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/tp3d/layout_3d.h"

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

// For each element of the whole model: how many ranks of the q-cube hold it (`held`) and how many
// count it (`counted`, Layout3d::counts_once).
void tally(const GPTConfig& cfg, int q, std::vector<int>* held, std::vector<int>* counted) {
  const int64_t psi = GPTLayout(cfg).num_params();
  held->assign(psi, 0), counted->assign(psi, 0);
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < q; ++j)
      for (int l = 0; l < q; ++l) {
        const Layout3d lay(cfg, q, i, j, l);
        std::vector<float> ones(lay.num_params(), 1.f), mine(lay.num_params(), 0.f);
        for (const Param3d& p : lay.params())
          if (lay.counts_once(p)) std::fill_n(mine.begin() + p.offset, p.numel, 1.f);
        std::vector<float> h(psi, 0.f), c(psi, 0.f);
        lay.copy_to_full(ones.data(), h.data());
        lay.copy_to_full(mine.data(), c.data());
        for (int64_t e = 0; e < psi; ++e) (*held)[e] += h[e] != 0, (*counted)[e] += c[e] != 0;
      }
}

GPTConfig model(int q) {
  GPTConfig cfg = GPTConfig::preset("tiny");  // C = 64, V = 256
  cfg.layers = 2;
  cfg.heads = 4;
  if (q == 3) cfg.d = 72, cfg.heads = 6, cfg.vocab = 261;  // q | H, q² | C, q² | V
  return cfg;
}

TEST(Layout3d, EveryElementHeldAndCountedOnce) {
  for (int q : {1, 2, 3}) {
    const GPTConfig cfg = model(q);
    std::vector<int> held, counted;
    tally(cfg, q, &held, &counted);
    int64_t wrong = 0, replicated = 0;
    for (size_t e = 0; e < held.size(); ++e) {
      if (held[e] == 0) ADD_FAILURE() << "q=" << q << ": " << tensor_of(cfg, e) << " held by no rank";
      if (counted[e] != 1 && wrong++ < 5)
        ADD_FAILURE() << "q=" << q << ": " << tensor_of(cfg, e) << " counted " << counted[e]
                      << " times over the cube";
      replicated += held[e] > 1;
    }
    EXPECT_EQ(wrong, 0) << "q=" << q;
    // The check has something to choose from: at q > 1 every vector is held by q² ranks.
    if (q > 1) EXPECT_GT(replicated, 0);
    std::printf("q=%d: %zu elements, %lld held by more than one rank, each counted once\n", q,
                held.size(), static_cast<long long>(replicated));
  }
}

TEST(Layout3d, CopyToFullInvertsCopyFromFull) {
  const int q = 2;
  const GPTConfig cfg = model(q);
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
