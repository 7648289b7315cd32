// The mixture-of-experts layouts (gpt_layout.cc, block_params.h kExpertParams): tensor names,
// the parameter count against its closed form, which blocks are MoE, and the expert-parallel
// split over ep ranks (experts [r·E/ep, (r+1)·E/ep) of each MoE block, everything else whole).
//
//   Ψ = (V + ctx)·C + L_dense·(12C² + 13C) + L_moe·(4C² + 8C + CE + E·(8C² + 5C)) + 2C,
//   L_moe = ⌊L/n⌋ (block l is MoE when (l+1) % n == 0), L_dense = L − L_moe.
//   moe-tiny (V=256 ctx=16 C=32 L=2 n=2 E=4): 8,704 + 12,704 + 37,888 + 64 = 59,360.
//   moe-mini (V=256 ctx=64 C=128 L=4 n=2 E=8): 40,960 + 2·198,272 + 2·1,121,280 + 256
//            = 2,680,320.
//   An ep rank holds Ψ − L_moe·(E − E/ep)·(8C² + 5C).
//
// Glossary: V vocab, ctx context, C channels, L layers, n moe_every, E experts, k top_k,
// ep expert-parallel ranks, r rank, Ψ parameter count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/testing/files.h"
#include "common/nn/init.h"

namespace llmp {
namespace {

/// The expert-parallel group as the layout and init see it: only size() and rank() matter.
class FakeExpertComm : public ExpertComm {
 public:
  FakeExpertComm(int size, int rank) : size_(size), rank_(rank) {}
  int size() const override { return size_; }
  int rank() const override { return rank_; }

 private:
  int size_, rank_;
};

int64_t closed_form(const GPTConfig& c) {
  const int64_t C = c.d, E = c.experts, V = c.vocab, ctx = c.ctx;
  const int64_t moe = c.layers / c.moe_every, dense = c.layers - moe;
  return (V + ctx) * C + dense * (12 * C * C + 13 * C) +
         moe * (4 * C * C + 8 * C + C * E + E * (8 * C * C + 5 * C)) + 2 * C;
}

using testing::error_of;  // common/testing/files.h

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool has_param(const GPTLayout& lay, const std::string& name) {
  for (const ParamSpec& p : lay.params())
    if (p.name == name) return true;
  return false;
}

TEST(MoeLayout, ParameterCountsFromTheClosedForm) {
  EXPECT_EQ(GPTLayout(GPTConfig::preset("moe-tiny")).num_params(), 59360);
  EXPECT_EQ(GPTLayout(GPTConfig::preset("moe-mini")).num_params(), 2680320);
  for (const char* name : {"moe-tiny", "moe-mini"}) {
    const GPTConfig c = GPTConfig::preset(name);
    EXPECT_EQ(GPTLayout(c).num_params(), closed_form(c)) << name;
  }
  GPTConfig every = GPTConfig::preset("moe-mini");  // every block MoE, top-2, E = 4
  every.moe_every = 1, every.experts = 4, every.top_k = 2;
  EXPECT_EQ(GPTLayout(every).num_params(), closed_form(every));
  GPTConfig third = GPTConfig::preset("mini");  // L = 4, n = 3: block 2 only
  third.experts = 2, third.moe_every = 3;
  EXPECT_EQ(GPTLayout(third).num_params(), closed_form(third));
}

TEST(MoeLayout, MoeBlocksAreEveryNth) {
  const GPTConfig mini = GPTConfig::preset("moe-mini");
  EXPECT_FALSE(mini.is_moe_block(0));
  EXPECT_TRUE(mini.is_moe_block(1));
  EXPECT_FALSE(mini.is_moe_block(2));
  EXPECT_TRUE(mini.is_moe_block(3));
  EXPECT_EQ(mini.moe_blocks(), 2);
  GPTConfig c = GPTConfig::preset("mini");
  c.experts = 2, c.moe_every = 3;  // (l+1) % 3 == 0: block 2 only
  EXPECT_EQ(c.moe_blocks(), 1);
  const GPTLayout lay(c);
  for (int l = 0; l < 4; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const bool moe = l == 2;
    EXPECT_EQ(c.is_moe_block(l), moe) << l;
    EXPECT_EQ(has_param(lay, h + "mlp.router.weight"), moe) << l;
    EXPECT_EQ(has_param(lay, h + "mlp.c_fc.weight"), !moe) << l;
  }
  EXPECT_EQ(GPTConfig::preset("mini").moe_blocks(), 0);
  EXPECT_FALSE(GPTConfig::preset("mini").is_moe_block(1));
}

TEST(MoeLayout, TensorNamesOfMoeTiny) {
  const GPTConfig c = GPTConfig::preset("moe-tiny");  // C = 32, E = 4, block 1 MoE
  const GPTLayout lay(c);
  std::vector<std::string> block1;
  for (const ParamSpec& p : lay.params())
    if (p.unit == 2) block1.push_back(p.name);
  const std::vector<std::string> expect = {
      "h.1.ln_1.weight", "h.1.ln_1.bias", "h.1.attn.c_attn.weight", "h.1.attn.c_attn.bias",
      "h.1.attn.c_proj.weight", "h.1.attn.c_proj.bias", "h.1.ln_2.weight", "h.1.ln_2.bias",
      "h.1.mlp.router.weight",
      "h.1.mlp.experts.0.c_fc.weight", "h.1.mlp.experts.0.c_fc.bias",
      "h.1.mlp.experts.0.c_proj.weight", "h.1.mlp.experts.0.c_proj.bias",
      "h.1.mlp.experts.1.c_fc.weight", "h.1.mlp.experts.1.c_fc.bias",
      "h.1.mlp.experts.1.c_proj.weight", "h.1.mlp.experts.1.c_proj.bias",
      "h.1.mlp.experts.2.c_fc.weight", "h.1.mlp.experts.2.c_fc.bias",
      "h.1.mlp.experts.2.c_proj.weight", "h.1.mlp.experts.2.c_proj.bias",
      "h.1.mlp.experts.3.c_fc.weight", "h.1.mlp.experts.3.c_fc.bias",
      "h.1.mlp.experts.3.c_proj.weight", "h.1.mlp.experts.3.c_proj.bias"};
  EXPECT_EQ(block1, expect);
  EXPECT_EQ(lay.find("h.1.mlp.router.weight").shape, (std::vector<int64_t>{32, 4}));
  EXPECT_EQ(lay.find("h.1.mlp.experts.2.c_fc.weight").shape, (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(lay.find("h.1.mlp.experts.2.c_fc.bias").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(lay.find("h.1.mlp.experts.3.c_proj.weight").shape, (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(lay.find("h.1.mlp.experts.3.c_proj.bias").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(lay.find("h.1.mlp.experts.0.c_fc.weight").split, Split::kExpert);
  EXPECT_EQ(lay.find("h.1.mlp.router.weight").split, Split::kReplicated);
  EXPECT_NO_THROW(lay.find("h.0.mlp.c_fc.weight"));  // block 0 stays dense
  EXPECT_THROW(lay.find("h.1.mlp.c_fc.weight"), std::out_of_range);
  EXPECT_THROW(lay.find("h.1.mlp.experts.4.c_fc.weight"), std::out_of_range);
  // Block 1's unit: 4C² + 8C + CE + E·(8C² + 5C) = 4,096 + 256 + 128 + 4·8,352 = 37,888.
  EXPECT_EQ(lay.unit_numel(2), 37888);
}

class MoeLayoutEp : public ::testing::TestWithParam<int> {};

// moe-mini (E = 8) over ep = 1, 2, 4: rank r's experts, their global offsets, the ranks' parts
// together rebuilding the whole buffer exactly, and the round trip through copy_from_full.
TEST_P(MoeLayoutEp, EachRankHoldsItsExperts) {
  const int ep = GetParam();
  const GPTConfig c = GPTConfig::preset("moe-mini");
  const int E = c.experts, held = E / ep;
  const int64_t C = c.d, expert_numel = 8 * C * C + 5 * C;
  const GPTLayout whole(c);
  const int64_t psi = whole.num_params();
  std::vector<float> full(psi);
  for (int64_t i = 0; i < psi; ++i) full[i] = static_cast<float>(uniform_at(3, i));
  std::vector<float> rebuilt(psi, std::numeric_limits<float>::quiet_NaN());
  for (int r = 0; r < ep; ++r) {
    const GPTLayout lay(c, 1, 0, ep, r);
    EXPECT_EQ(lay.ep_size(), ep);
    EXPECT_EQ(lay.ep_rank(), r);
    EXPECT_EQ(lay.num_params(), psi - c.moe_blocks() * (E - held) * expert_numel) << r;
    for (int l : {1, 3})
      for (int e = 0; e < E; ++e) {
        const std::string name =
            "h." + std::to_string(l) + ".mlp.experts." + std::to_string(e) + ".c_fc.weight";
        const bool mine = e >= r * held && e < (r + 1) * held;
        bool found = true;
        try {
          lay.find(name);
        } catch (const std::out_of_range&) {
          found = false;
        }
        EXPECT_EQ(found, mine) << name << " on rank " << r << " of " << ep;
      }
    // Every tensor's global_offset is that of the same name in the whole layout; the local
    // buffer is contiguous.
    int64_t next = 0;
    for (const ParamSpec& p : lay.params()) {
      const ParamSpec& w = whole.find(p.name);
      EXPECT_EQ(p.global_offset, w.offset) << p.name;
      EXPECT_EQ(p.shape, w.shape) << p.name;
      EXPECT_EQ(p.offset, next) << p.name;
      next += p.numel;
    }
    EXPECT_EQ(next, lay.num_params());
    // copy_from_full takes each tensor from its place in the whole buffer ...
    std::vector<float> local(lay.num_params());
    lay.copy_from_full(full.data(), local.data());
    for (const ParamSpec& p : lay.params())
      for (int64_t i = 0; i < p.numel; ++i)
        ASSERT_EQ(local[p.offset + i], full[whole.find(p.name).offset + i]) << p.name << i;
    // ... and copy_to_full puts it back: the ranks together rebuild all of it.
    lay.copy_to_full(local.data(), rebuilt.data());
  }
  for (int64_t i = 0; i < psi; ++i) ASSERT_EQ(rebuilt[i], full[i]) << "element " << i;
}

// init_params on rank r of ep (GPT::with_expert_comm with a fake group) equals the whole model's
// initialisation at the same names.
TEST_P(MoeLayoutEp, InitOnARankIsItsPartOfTheWholeInit) {
  const int ep = GetParam();
  const GPTConfig c = GPTConfig::preset("moe-mini");
  const GPT whole(c);
  std::vector<float> full(whole.layout().num_params());
  whole.init_params(full.data(), 1234);
  for (int r = 0; r < ep; ++r) {
    FakeExpertComm comm(ep, r);
    const GPT part = whole.with_expert_comm(&comm);
    ASSERT_EQ(part.layout().ep_rank(), r);
    std::vector<float> local(part.layout().num_params());
    part.init_params(local.data(), 1234);
    for (const ParamSpec& p : part.layout().params()) {
      const int64_t g = whole.layout().find(p.name).offset;
      for (int64_t i = 0; i < p.numel; ++i)
        ASSERT_EQ(local[p.offset + i], full[g + i]) << p.name << "[" << i << "] rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ep, MoeLayoutEp, ::testing::Values(1, 2, 4));

TEST(MoeLayout, ExpertsAreInitialisedLikeTheDenseMlp) {
  const GPT m(GPTConfig::preset("moe-tiny"));
  std::vector<float> w(m.layout().num_params());
  m.init_params(w.data(), 5);
  const GPTLayout& lay = m.layout();
  auto stddev = [&](const std::string& name) {
    const ParamSpec& p = lay.find(name);
    double s = 0;
    for (int64_t i = 0; i < p.numel; ++i) s += double{w[p.offset + i]} * w[p.offset + i];
    return std::sqrt(s / p.numel);
  };
  EXPECT_NEAR(stddev("h.1.mlp.router.weight"), 0.02, 0.004);
  EXPECT_NEAR(stddev("h.1.mlp.experts.3.c_fc.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("h.1.mlp.experts.3.c_proj.weight"), 0.02 / 2, 0.001);  // 0.02/√(2L), L = 2
  EXPECT_EQ(stddev("h.1.mlp.experts.1.c_fc.bias"), 0.0);
  // Different experts get different weights (they must be able to specialise).
  EXPECT_NE(w[lay.find("h.1.mlp.experts.0.c_fc.weight").offset],
            w[lay.find("h.1.mlp.experts.1.c_fc.weight").offset]);
}

TEST(MoeLayout, BadInputNamesTheValues) {
  const GPTConfig mini = GPTConfig::preset("moe-mini");  // E = 8
  const std::string ep3 = error_of([&] { GPTLayout(mini, 1, 0, 3, 0); });
  EXPECT_TRUE(has(ep3, "3") && has(ep3, "experts=8")) << ep3;
  FakeExpertComm comm3(3, 1);
  EXPECT_THROW(GPT(mini).with_expert_comm(&comm3), std::invalid_argument);
  const std::string tp2 = error_of([&] { GPTLayout(mini, 2, 0); });
  EXPECT_TRUE(has(tp2, "t=2")) << tp2;
  GPTConfig k_over = mini;
  k_over.top_k = 9;
  const std::string k9 = error_of([&] { GPTLayout{k_over}; });
  EXPECT_TRUE(has(k9, "top_k=9") && has(k9, "experts=8")) << k9;
  GPTConfig c0 = mini;
  c0.capacity_factor = 0;
  EXPECT_TRUE(has(error_of([&] { GPTLayout{c0}; }), "capacity_factor=0"));
  EXPECT_THROW(GPT(GPTConfig::preset("mini")).with_expert_comm(&comm3), std::invalid_argument);
  for (const std::string& m : {ep3, tp2, k9}) EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

}  // namespace
}  // namespace llmp
