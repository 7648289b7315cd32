// Presets, parameter counts against the closed form, the flat layout and the initialisation.
//
// Ψ = (V + ctx)·C + L·(12C² + 13C) + 2C  (gpt_layout.cc). Glossary: V vocab, C channels, L layers.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "common/nn/block_params.h"
#include "common/nn/gpt.h"
#include "common/nn/init.h"

namespace llmp {
namespace {

int64_t closed_form(const GPTConfig& c) {
  const int64_t C = c.d;
  return (int64_t{c.vocab} + c.ctx) * C + c.layers * (12 * C * C + 13 * C) + 2 * C;
}

TEST(GPTLayout, ParameterCounts) {
  EXPECT_EQ(GPTLayout(GPTConfig::preset("mini")).num_params(), 834304);
  EXPECT_EQ(GPTLayout(GPTConfig::preset("gpt2")).num_params(), 124439808);
  for (const char* name : {"tiny", "mini", "gpt2"}) {
    const GPTConfig c = GPTConfig::preset(name);
    EXPECT_EQ(GPTLayout(c).num_params(), closed_form(c)) << name;
  }
  EXPECT_EQ(GPTLayout(GPTConfig::preset("tiny")).num_params(),
            34176);  // (256+16)·32 + 2·12704 + 64
}

TEST(GPTLayout, Presets) {
  const GPTConfig t = GPTConfig::preset("tiny");
  EXPECT_EQ(t.layers, 2);
  EXPECT_EQ(t.d, 32);
  EXPECT_EQ(t.heads, 2);
  EXPECT_EQ(t.ctx, 16);
  EXPECT_EQ(t.vocab, 256);
  EXPECT_EQ(t.name, "tiny");
  const GPTConfig m = GPTConfig::preset("mini");
  EXPECT_EQ(m.layers, 4);
  EXPECT_EQ(m.d, 128);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.ctx, 64);
}

TEST(GPTLayout, UnknownPresetNamesTheValue) {
  try {
    GPTConfig::preset("gpt5");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'gpt5'"), std::string::npos) << e.what();
  }
  GPTConfig bad = GPTConfig::preset("tiny");
  bad.heads = 3;  // does not divide C = 32
  EXPECT_THROW(GPTLayout{bad}, std::invalid_argument);
}

TEST(GPTLayout, UnitsAreContiguousAndOrdered) {
  const GPTConfig c = GPTConfig::preset("mini");
  const GPTLayout lay(c);
  ASSERT_EQ(lay.num_units(), c.layers + 2);
  int64_t next = 0;
  int unit = 0;
  for (const ParamSpec& p : lay.params()) {
    EXPECT_EQ(p.offset, next) << p.name;  // no gaps, no overlaps
    int64_t n = 1;
    for (int64_t s : p.shape) n *= s;
    EXPECT_EQ(p.numel, n) << p.name;
    EXPECT_TRUE(p.unit == unit || p.unit == unit + 1) << p.name;  // units in order
    if (p.unit != unit) {
      unit = p.unit;
      EXPECT_EQ(lay.unit_offset(unit), p.offset) << p.name;
    }
    next += p.numel;
  }
  EXPECT_EQ(next, lay.num_params());
  int64_t sum = 0;
  for (int u = 0; u < lay.num_units(); ++u) {
    EXPECT_EQ(lay.unit_offset(u), sum);
    sum += lay.unit_numel(u);
  }
  EXPECT_EQ(sum, lay.num_params());
  EXPECT_EQ(lay.unit_numel(0), (c.vocab + c.ctx) * c.d);
  EXPECT_EQ(lay.unit_numel(1), 12 * c.d * c.d + 13 * c.d);
  EXPECT_EQ(lay.unit_numel(c.layers + 1), 2 * c.d);
}

TEST(GPTLayout, NamesShapesAndBlockPointersAgree) {
  const GPTConfig c = GPTConfig::preset("tiny");
  const GPTLayout lay(c);
  EXPECT_EQ(lay.find("wte.weight").offset, 0);
  EXPECT_EQ(lay.find("h.1.attn.c_attn.weight").shape, (std::vector<int64_t>{32, 96}));
  EXPECT_EQ(lay.find("h.0.mlp.c_proj.weight").shape, (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(lay.find("ln_f.bias").unit, c.layers + 1);
  try {
    lay.find("lm_head.weight");
    FAIL() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos);
  }
  // block_params() (used by the block's math) points where the layout says each tensor is.
  const std::vector<float> buf(lay.num_params());
  const float* base = buf.data();
  const int64_t u1 = lay.unit_offset(2);
  const auto p = block_params(base + u1, lay.block_shape());
  auto off = [&](const char* s) { return lay.find(std::string("h.1.") + s).offset; };
  EXPECT_EQ(p.ln1_w - base, off("ln_1.weight"));
  EXPECT_EQ(p.attn_b - base, off("attn.c_attn.bias"));
  EXPECT_EQ(p.proj_w - base, off("attn.c_proj.weight"));
  EXPECT_EQ(p.ln2_b - base, off("ln_2.bias"));
  EXPECT_EQ(p.fc_w - base, off("mlp.c_fc.weight"));
  EXPECT_EQ(p.fcproj_b - base, off("mlp.c_proj.bias"));
}

TEST(GPTInit, DeterministicWithGPT2Statistics) {
  const GPT m(GPTConfig::preset("mini"));
  const GPTLayout& lay = m.layout();
  std::vector<float> a(lay.num_params()), b(lay.num_params()), c(lay.num_params());
  m.init_params(a.data(), 42);
  m.init_params(b.data(), 42);
  m.init_params(c.data(), 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto stddev = [&](const std::string& name) {
    const ParamSpec& p = lay.find(name);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < p.numel; ++i)
      s += a[p.offset + i], s2 += a[p.offset + i] * a[p.offset + i];
    const double mu = s / p.numel;
    EXPECT_NEAR(mu, 0.0, 1e-3) << name;
    return std::sqrt(s2 / p.numel - mu * mu);
  };
  EXPECT_NEAR(stddev("wte.weight"), 0.02, 0.0005);
  EXPECT_NEAR(stddev("h.0.mlp.c_fc.weight"), 0.02, 0.0005);
  EXPECT_NEAR(stddev("h.3.attn.c_proj.weight"), 0.02 / std::sqrt(8.0), 0.0005);
  EXPECT_NEAR(stddev("h.3.mlp.c_proj.weight"), 0.02 / std::sqrt(8.0), 0.0005);
  for (const char* n : {"h.0.ln_1.weight", "ln_f.weight"})
    EXPECT_EQ(a[lay.find(n).offset + 5], 1.f);
  for (const char* n : {"h.0.attn.c_attn.bias", "ln_f.bias"})
    EXPECT_EQ(a[lay.find(n).offset + 5], 0.f);
  // Counter-based: element i is 0.02·normal_at(seed, i), so any shard can be made on its own.
  const int64_t i = lay.find("h.2.mlp.c_fc.weight").offset + 1234;
  EXPECT_EQ(a[i], static_cast<float>(0.02 * normal_at(42, i)));
}

}  // namespace
}  // namespace llmp

namespace llmp {
namespace {

/// Ψ_r = VC/t + ctx·C + L·(12C²/t + 7C/t + 6C) + 2C (gpt.h).
int64_t tp_closed_form(const GPTConfig& c, int t) {
  const int64_t C = c.d, V = c.vocab;
  return V * C / t + int64_t{c.ctx} * C + c.layers * (12 * C * C / t + 7 * C / t + 6 * C) + 2 * C;
}

TEST(GPTLayout, TensorParallelSlicesMatchTheClosedFormAndTileTheModel) {
  const GPTConfig c = GPTConfig::preset("mini");  // H = 4: t = 1, 2, 4
  const GPTLayout whole(c);
  std::vector<float> full(whole.num_params());
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i);  // value = global index
  for (int t : {1, 2, 4}) {
    std::vector<float> back(full.size(), -1.f);
    for (int r = 0; r < t; ++r) {
      const GPTLayout lay(c, t, r);
      EXPECT_EQ(lay.num_params(), tp_closed_form(c, t)) << "t=" << t;
      std::vector<float> local(lay.num_params());
      lay.copy_from_full(full.data(), local.data());
      lay.copy_to_full(local.data(), back.data());
      // Spot checks of each split against block_params.h's table (C = 128, hs = 32).
      const int64_t C = c.d, q = C / t;
      const ParamSpec& qkv = lay.find("h.1.attn.c_attn.weight");  // (C, 3C/t)
      EXPECT_EQ(qkv.shape, (std::vector<int64_t>{C, 3 * q}));
      const int64_t g0 = whole.find("h.1.attn.c_attn.weight").offset;
      // row 5: this rank's q columns, then k, then v
      EXPECT_EQ(local[qkv.offset + 5 * 3 * q + 0], full[g0 + 5 * 3 * C + r * q]);
      EXPECT_EQ(local[qkv.offset + 5 * 3 * q + q + 1], full[g0 + 5 * 3 * C + C + r * q + 1]);
      EXPECT_EQ(local[qkv.offset + 5 * 3 * q + 2 * q], full[g0 + 5 * 3 * C + 2 * C + r * q]);
      const ParamSpec& proj = lay.find("h.0.mlp.c_proj.weight");  // rows [r·4C/t, ...)
      EXPECT_EQ(proj.shape, (std::vector<int64_t>{4 * C / t, C}));
      EXPECT_EQ(local[proj.offset], full[whole.find("h.0.mlp.c_proj.weight").offset + r * 4 * C / t * C]);
      const ParamSpec& fcb = lay.find("h.2.mlp.c_fc.bias");  // columns [r·4C/t, ...)
      EXPECT_EQ(local[fcb.offset + 3], full[whole.find("h.2.mlp.c_fc.bias").offset + r * 4 * C / t + 3]);
      const ParamSpec& wte = lay.find("wte.weight");  // vocab rows [r·V/t, ...)
      EXPECT_EQ(wte.shape, (std::vector<int64_t>{c.vocab / t, C}));
      EXPECT_EQ(local[wte.offset + C + 1], full[(r * c.vocab / t + 1) * C + 1]);
      EXPECT_EQ(lay.find("h.3.attn.c_proj.bias").numel, C);  // replicated
    }
    EXPECT_EQ(back, full) << "the t slices together are the whole model, t=" << t;
  }
}

TEST(GPTLayout, TensorParallelSizeMustDivideHeadsFfnAndVocab) {
  const GPTConfig c = GPTConfig::preset("mini");  // H = 4, 4C = 512, V = 256
  try {
    GPTLayout(c, 3, 0);
    FAIL() << "t = 3 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tensor-parallel size 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("H=4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(GPTLayout(c, 8, 0), std::invalid_argument);  // 8 does not divide H = 4
  EXPECT_THROW(GPTLayout(c, 2, 2), std::invalid_argument);  // rank outside [0, t)
}

TEST(GPTInit, ATensorParallelSliceIsTheSliceOfTheWholeInitialisation) {
  const GPTConfig c = GPTConfig::preset("tiny");
  const GPT whole(c);
  std::vector<float> full(whole.layout().num_params());
  whole.init_params(full.data(), 9);
  struct Rank1Of2 : TpComm {
    int size() const override { return 2; }
    int rank() const override { return 1; }
  } tp;
  const GPT slice(c, tp);
  std::vector<float> mine(slice.layout().num_params()), expected(mine.size());
  slice.init_params(mine.data(), 9);
  slice.layout().copy_from_full(full.data(), expected.data());
  EXPECT_EQ(mine, expected);
}

}  // namespace
}  // namespace llmp
