// Weight decay's mask: which GPT tensors AdamW decays, and that a shard or a tensor-parallel
// slice of the mask is the same mask element for element.
#include "common/optim/decay_mask.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace llmp {
namespace {

// One flag per element: 1 where `ranges` decay it.
std::vector<float> flags(const std::vector<ElementRange>& ranges, int64_t n) {
  std::vector<float> f(n, 0.0f);
  for (const ElementRange& r : ranges)
    for (int64_t i = r.begin; i < r.end; ++i) f[i] = 1.0f;
  return f;
}

// GPT-2's tensors, as nanoGPT's configure_optimizers sorts them (dim >= 2: decay), written out
// by name rather than derived from the shapes the code looks at.
bool gpt2_decays(const std::string& name) {
  static const std::set<std::string> kDecayedSuffixes = {
      "wte.weight", "wpe.weight", "attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
      "mlp.c_proj.weight"};
  for (const std::string& s : kDecayedSuffixes)
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return true;
  return false;
}

// One AdamW step with zero gradients moves only the decayed elements: p ← p - lr·λ·p.
TEST(DecayMask, AdamWDecaysMatricesNotBiasesOrLayerNorm) {
  const GPT model(GPTConfig::preset("tiny"));
  const GPTLayout& lay = model.layout();
  const int64_t n = lay.num_params();
  std::vector<float> p(n), before, g(n, 0.0f);
  model.init_params(p.data(), 3);
  for (const ParamSpec& s : lay.params())  // LayerNorm weights start at 1, biases at 0: make
    if (s.shape.size() < 2)                // them non-zero so that a decay would show
      for (int64_t i = 0; i < s.numel; ++i) p[s.offset + i] = 0.5f + 0.01f * i;
  before = p;
  AdamWConfig cfg;
  cfg.lr = 0.1f;
  cfg.weight_decay = 0.5f;
  AdamW opt(n, cfg, decay_ranges(lay, DecayRule::kMatrices));
  opt.step(p.data(), g.data(), 1);
  int decayed = 0, kept = 0;
  for (const ParamSpec& s : lay.params()) {
    const bool decay = gpt2_decays(s.name);
    for (int64_t i = 0; i < s.numel; ++i) {
      const float b = before[s.offset + i], a = p[s.offset + i];
      if (decay)
        ASSERT_FLOAT_EQ(a, b - 0.1f * 0.5f * b) << s.name << " element " << i;
      else
        ASSERT_EQ(a, b) << s.name << " element " << i << " was decayed";
    }
    (decay ? decayed : kept) += 1;
  }
  EXPECT_EQ(decayed, 2 + 4 * 2);  // wte, wpe, 4 matrices per block, L = 2
  EXPECT_EQ(kept, 8 * 2 + 2);     // 8 biases and LayerNorm vectors per block, ln_f's two
  EXPECT_EQ(p[lay.find("h.1.attn.c_attn.bias").offset], before[lay.find("h.1.attn.c_attn.bias").offset]);
  EXPECT_NE(p[lay.find("h.1.mlp.c_fc.weight").offset], before[lay.find("h.1.mlp.c_fc.weight").offset]);
}

TEST(DecayMask, DecayAllDecaysEveryElement) {
  const GPTLayout lay(GPTConfig::preset("tiny"));
  const std::vector<ElementRange> all = decay_ranges(lay, DecayRule::kAll);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0], (ElementRange{0, lay.num_params()}));
  EXPECT_STREQ(decay_rule_name(DecayRule::kAll), "all");
  EXPECT_STREQ(decay_rule_name(DecayRule::kMatrices), "dim>=2");
}

// ZeRO: the shards' masks, laid end to end, are the whole model's mask (Ψ not divisible by N,
// so the last shard is short: V = 257).
TEST(DecayMask, ShardsTileTheWholeMask) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.vocab = 257;
  const GPTLayout lay(c);
  const int64_t psi = lay.num_params();
  const std::vector<ElementRange> whole = decay_ranges(lay, DecayRule::kMatrices);
  const std::vector<float> want = flags(whole, psi);
  for (int N : {2, 3, 4}) {
    const int64_t S = (psi + N - 1) / N;
    std::vector<float> got;
    for (int r = 0; r < N; ++r) {
      const int64_t begin = std::min<int64_t>(r * S, psi), count = std::min(S, psi - begin);
      const std::vector<float> f = flags(slice_ranges(whole, begin, count), count);
      got.insert(got.end(), f.begin(), f.end());
    }
    EXPECT_EQ(got, want) << "N = " << N;
  }
}

// Tensor parallelism: each rank's mask from its own layout, put where its elements sit in the
// whole model, is the whole model's mask.
TEST(DecayMask, TensorParallelSlicesAssembleTheWholeMask) {
  const GPTConfig c = GPTConfig::preset("tiny");  // H = 2
  const GPTLayout whole(c);
  const std::vector<float> want = flags(decay_ranges(whole, DecayRule::kMatrices), whole.num_params());
  std::vector<float> got(whole.num_params(), -1.0f);
  for (int r = 0; r < 2; ++r) {
    const GPTLayout local(c, 2, r);
    const std::vector<float> f = flags(decay_ranges(local, DecayRule::kMatrices), local.num_params());
    local.copy_to_full(f.data(), got.data());
  }
  EXPECT_EQ(got, want);
}

TEST(DecayMask, SliceMovesTheRangesToTheHoldersOffset) {
  const std::vector<ElementRange> r = {{2, 5}, {8, 12}};
  EXPECT_EQ(slice_ranges(r, 4, 6, 100), (std::vector<ElementRange>{{100, 101}, {104, 106}}));
  EXPECT_TRUE(slice_ranges(r, 5, 3).empty());
}

TEST(DecayMask, AdamWRefusesRangesOutsideItsBuffer) {
  EXPECT_THROW(AdamW(10, AdamWConfig{}, {{5, 11}}), std::invalid_argument);
  EXPECT_THROW(AdamW(10, AdamWConfig{}, {{5, 8}, {6, 9}}), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
