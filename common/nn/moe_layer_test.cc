// The mixture-of-experts sub-layer (moe.h) through GPT::block_forward / block_backward on
// moe-tiny's MoE block (layer 1), one rank (ExpertComm::none(): the all_to_alls are copies).
//
//   out[t] = res1[t] + Σ_{j kept} g_j(t) · expert_{e_j}(ln_2(res1[t]))
//
// (a) a token whose every assignment is over capacity leaves the block as it entered the MLP
//     sub-layer: out[t] = res1[t] bit for bit (the residual carries it);
// (b) E experts that are all copies of one dense MLP: k = 1 gives out = res1 + p_{e1}·mlp(ln_2),
//     k = 2 gives out = res1 + (g_1 + g_2)·mlp = the dense block's out (renormalised gates sum
//     to 1), compared with a plain `tiny` GPT's block holding that MLP;
// (c) block_backward_input then block_backward_weight equals block_backward bit for bit;
// (d) MoeStats after one forward: n·k assignments, Σ(routed − kept) dropped, B aux terms;
// (e) in bf16 (the layer's 16-bit path, moe.cc) the router and the combine are fp32: the gates
//     are route() of ln2 @ W_router computed in fp32 from the layer's own stored bf16 ln2, and
//     out = bf16(res1 + g·Yg) with the fp32 gates, bit for bit; what is kept and dispatched is
//     bf16; the block's backward runs under the walk's bf16 operand declaration.
// The router's logits are recomputed here in double (LayerNorm, then ln2 @ W_router) and routed
// with a fresh route(), independently of the layer's own router pass.
//
// Glossary: B sequences, T sequence length, n = B·T tokens, C channels, E experts, k experts per
// token, c capacity factor, g gate, p router probability, LN LayerNorm (eps 1e-5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/init.h"
#include "common/nn/moe_routing.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ring_self_block.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

constexpr int kB = 2, kT = 16, kLayer = 1;

/// moe-tiny with (k, c), parameters: GPT-2 init plus noise (non-zero biases, LayerNorm gains
/// away from 1) and a router scaled up so that its choices are clear (no near ties).
struct MoeBlock {
  GPTConfig cfg;
  GPT m;
  std::vector<float> params;
  MoeBlock(int k, double c, uint64_t seed = 7)
      : cfg(make(k, c)), m(cfg), params(m.layout().num_params()) {
    m.init_params(params.data(), seed);
    for (size_t i = 0; i < params.size(); ++i)
      params[i] += static_cast<float>(0.1 * (uniform_at(seed + 100, i) - 0.5));
    const ParamSpec& r = m.layout().find("h.1.mlp.router.weight");
    for (int64_t i = 0; i < r.numel; ++i) params[r.offset + i] *= 20.0f;
  }
  static GPTConfig make(int k, double c) {
    GPTConfig g = GPTConfig::preset("moe-tiny");
    g.top_k = k, g.capacity_factor = c;
    return g;
  }
  const float* unit() const { return params.data() + m.layout().unit_offset(1 + kLayer); }
  const float* at(const std::string& name) const {
    return params.data() + m.layout().find(name).offset;
  }
};

Tensor random_input(uint64_t seed) {
  Tensor x = Tensor::empty({kB, kT, 32}, DType::kF32, MemCategory::kActivations);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.f32()[i] = static_cast<float>(2 * uniform_at(seed, i) - 1);
  return x;
}

/// The router's logits (n,E) recomputed in double: LN(res1; ln_2) @ W_router.
std::vector<float> router_logits(const MoeBlock& s, const Tensor& res1) {
  const int C = s.cfg.d, E = s.cfg.experts, n = static_cast<int>(res1.numel() / C);
  const float* w = s.at("h.1.ln_2.weight");
  const float* b = s.at("h.1.ln_2.bias");
  const float* router = s.at("h.1.mlp.router.weight");
  std::vector<float> z(static_cast<size_t>(n) * E);
  std::vector<double> ln(C);
  for (int t = 0; t < n; ++t) {
    const float* x = res1.f32() + static_cast<int64_t>(t) * C;
    double mean = 0, var = 0;
    for (int i = 0; i < C; ++i) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
    const double rstd = 1.0 / std::sqrt(var / C + 1e-5);
    for (int i = 0; i < C; ++i) ln[i] = (x[i] - mean) * rstd * w[i] + b[i];
    for (int e = 0; e < E; ++e) {
      double acc = 0;
      for (int i = 0; i < C; ++i) acc += ln[i] * router[i * E + e];
      z[static_cast<size_t>(t) * E + e] = static_cast<float>(acc);
    }
  }
  return z;
}

bool rows_equal(const float* a, const float* b, int C) {
  return std::memcmp(a, b, C * sizeof(float)) == 0;
}

// ---- (a) dropped tokens ------------------------------------------------------------------------

class DroppedToken : public ::testing::TestWithParam<int> {};

TEST_P(DroppedToken, LeavesTheBlockAsItsResidual) {
  const int k = GetParam();
  MoeBlock s(k, 0.25);  // cap = ⌈k·16·0.25/4⌉ = k: most assignments are dropped
  const int C = s.cfg.d, n = kB * kT;
  BlockCache cache;
  const Tensor out = s.m.block_forward(kLayer, s.unit(), random_input(3), kB, kT, &cache);
  const std::vector<float> z = router_logits(s, cache.res1);
  const Routing r = route(z.data(), n, s.cfg.experts, k, kT, s.cfg.capacity_factor);
  ASSERT_EQ(r.cap, k);
  EXPECT_EQ(r.expert, cache.moe.routing.expert) << "the layer's router disagrees with LN @ W";
  EXPECT_EQ(r.slot, cache.moe.routing.slot);
  int dropped = 0, carried = 0;
  for (int t = 0; t < n; ++t) {
    bool all_dropped = true;
    for (int j = 0; j < k; ++j) all_dropped &= r.slot[t * k + j] < 0;
    const float* o = out.f32() + static_cast<int64_t>(t) * C;
    const float* res = cache.res1.f32() + static_cast<int64_t>(t) * C;
    if (all_dropped) {
      ++dropped;
      EXPECT_TRUE(rows_equal(o, res, C)) << "dropped token " << t << " is not its residual";
    } else {
      ++carried;
      EXPECT_FALSE(rows_equal(o, res, C)) << "token " << t << " has a slot but no MoE output";
    }
  }
  EXPECT_GT(dropped, 0) << "the capacity factor should drop whole tokens";
  EXPECT_GT(carried, 0);
}

INSTANTIATE_TEST_SUITE_P(TopK, DroppedToken, ::testing::Values(1, 2));

// ---- (b) identical experts = a gated dense MLP -------------------------------------------------

class IdenticalExperts : public ::testing::TestWithParam<int> {};

TEST_P(IdenticalExperts, AreTheDenseMlpScaledByTheGates) {
  const int k = GetParam();
  MoeBlock s(k, 4.0);  // cap = ⌈k·16·4/4⌉ ≥ 16 = T: no token is ever dropped
  const GPT dense(GPTConfig::preset("tiny"));
  std::vector<float> dp(dense.layout().num_params());
  dense.init_params(dp.data(), 11);
  for (size_t i = 0; i < dp.size(); ++i)
    dp[i] += static_cast<float>(0.1 * (uniform_at(12, i) - 0.5));
  // The MoE block's ln_1, attention and ln_2 from the dense block; every expert = its MLP.
  auto copy = [&](const std::string& to, const std::string& from) {
    const ParamSpec& d = dense.layout().find(from);
    const ParamSpec& m = s.m.layout().find(to);
    ASSERT_EQ(d.numel, m.numel) << to;
    std::memcpy(s.params.data() + m.offset, dp.data() + d.offset, d.numel * sizeof(float));
  };
  for (const char* p : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias"})
    copy(std::string("h.1.") + p, std::string("h.1.") + p);
  for (int e = 0; e < s.cfg.experts; ++e)
    for (const char* p : {"c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"})
      copy("h.1.mlp.experts." + std::to_string(e) + "." + p, std::string("h.1.mlp.") + p);
  const Tensor x = random_input(4);
  BlockCache mc, dc;
  const Tensor mout = s.m.block_forward(kLayer, s.unit(), x, kB, kT, &mc);
  const float* dense_unit = dp.data() + dense.layout().unit_offset(1 + kLayer);
  const Tensor dout = dense.block_forward(kLayer, dense_unit, x, kB, kT, &dc);
  const int C = s.cfg.d, E = s.cfg.experts, n = kB * kT;
  ASSERT_EQ(std::memcmp(mc.res1.f32(), dc.res1.f32(), mc.res1.nbytes()), 0)
      << "the attention sub-layers differ";
  // g = Σ of the kept gates: p_{e1} for k = 1 (probabilities from the logits, in double);
  // (p_{e1} + p_{e2})/(p_{e1} + p_{e2}) = 1 for k = 2.
  const std::vector<float> z = router_logits(s, mc.res1);
  double worst = 0, g_min = 1, mlp_max = 0;
  for (int t = 0; t < n; ++t) {
    double g = 1.0;
    if (k == 1) {
      double zmax = z[t * E], sum = 0;
      for (int e = 1; e < E; ++e) zmax = std::max(zmax, static_cast<double>(z[t * E + e]));
      for (int e = 0; e < E; ++e) sum += std::exp(z[t * E + e] - zmax);
      g = 1.0 / sum;  // p_{e1} = exp(z_max − z_max) / Σ
    }
    g_min = std::min(g_min, g);
    for (int i = 0; i < C; ++i) {
      const int64_t a = static_cast<int64_t>(t) * C + i;
      const double res = mc.res1.f32()[a];
      const double mlp = static_cast<double>(dout.f32()[a]) - res;
      mlp_max = std::max(mlp_max, std::abs(mlp));
      const double expect = res + g * mlp;
      const double err = std::abs(mout.f32()[a] - expect);
      worst = std::max(worst, err);
      ASSERT_LT(err, 2e-5 + 2e-5 * std::abs(expect)) << "token " << t << " channel " << i;
    }
  }
  EXPECT_EQ(s.m.moe()->stats().dropped, 0);
  std::printf("k=%d: largest |moe - (res1 + g·mlp)| = %.3g, smallest g %.3f, largest |mlp| %.3g\n",
              k, worst, g_min, mlp_max);
  // The comparison can tell g from 1 and the MLP from nothing.
  if (k == 1) {
    EXPECT_LT(g_min, 0.8);
  }
  EXPECT_GT(mlp_max, 0.05);
}

INSTANTIATE_TEST_SUITE_P(TopK, IdenticalExperts, ::testing::Values(1, 2));

// ---- (c) the zero-bubble split -----------------------------------------------------------------

class ZeroBubbleSplit : public ::testing::TestWithParam<int> {};

TEST_P(ZeroBubbleSplit, BThenWEqualsTheFusedBackwardBitForBit) {
  const int k = GetParam();
  MoeBlock s(k, 1.0);  // moe-tiny's c = 1: drops some assignments
  s.m.moe()->set_loss_scale(1.0f / (kB * kT));  // the load-balancing loss's path is exercised
  const int64_t un = s.m.layout().unit_numel(1 + kLayer);
  const Tensor x = random_input(5);
  const Tensor dy = random_input(6);
  BlockCache c1, c2;
  s.m.block_forward(kLayer, s.unit(), x, kB, kT, &c1);
  s.m.block_forward(kLayer, s.unit(), x, kB, kT, &c2);
  EXPECT_GT(s.m.moe()->stats().dropped, 0);
  std::vector<float> g1(un, 0.25f), g2(un, 0.25f);  // accumulation onto non-zero gradients
  const Tensor dx1 = s.m.block_backward(kLayer, s.unit(), x, &c1, dy, g1.data());
  BlockGradCache keep;
  const Tensor dx2 = s.m.block_backward_input(kLayer, s.unit(), x, &c2, dy, &keep);
  s.m.block_backward_weight(kLayer, s.unit(), x, c2, keep, g2.data());
  ASSERT_EQ(dx1.numel(), dx2.numel());
  EXPECT_EQ(std::memcmp(dx1.f32(), dx2.f32(), dx1.nbytes()), 0) << "dL/dx differs";
  for (const ParamSpec& p : s.m.layout().params()) {
    if (p.unit != 1 + kLayer) continue;
    const int64_t o = p.offset - s.m.layout().unit_offset(1 + kLayer);
    EXPECT_EQ(std::memcmp(g1.data() + o, g2.data() + o, p.numel * sizeof(float)), 0) << p.name;
    bool moved = false;  // every tensor of the block receives a gradient
    for (int64_t i = 0; i < p.numel; ++i) moved |= g1[o + i] != 0.25f;
    EXPECT_TRUE(moved) << p.name << " got no gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(TopK, ZeroBubbleSplit, ::testing::Values(1, 2));

// ---- (d) the statistics ------------------------------------------------------------------------

TEST(MoeStatsAfterForward, CountsMatchAFreshRouting) {
  MoeBlock s(2, 1.0);
  const int n = kB * kT, E = s.cfg.experts, k = 2;
  MoeStats& st = s.m.moe()->stats();
  st.reset(E);
  BlockCache cache;
  s.m.block_forward(kLayer, s.unit(), random_input(8), kB, kT, &cache);
  const std::vector<float> z = router_logits(s, cache.res1);
  const Routing r = route(z.data(), n, E, k, kT, s.cfg.capacity_factor);
  std::vector<int64_t> first(E, 0);
  int64_t dropped = 0;
  for (int t = 0; t < n; ++t) {
    ++first[r.expert[t * k]];
    for (int j = 0; j < k; ++j) dropped += r.slot[t * k + j] < 0;
  }
  EXPECT_EQ(st.assignments, n * k);
  EXPECT_EQ(st.dropped, dropped);
  EXPECT_GT(st.dropped, 0);
  EXPECT_EQ(st.routed, r.routed);
  EXPECT_EQ(st.kept, r.kept);
  EXPECT_EQ(st.first, first);
  EXPECT_EQ(st.aux_terms, kB);
  EXPECT_EQ(st.forwards, 1);
  EXPECT_NEAR(st.aux_sum, r.aux_sum, 1e-5);
  EXPECT_GT(st.aux_sum, 0.0);  // each group's E·Σ f·P lies in (0, E]
  EXPECT_LE(st.aux_sum, kB * static_cast<double>(E));
  // A second forward adds to the counts; reset() clears them.
  s.m.block_forward(kLayer, s.unit(), random_input(8), kB, kT, &cache);
  EXPECT_EQ(st.assignments, 2 * n * k);
  EXPECT_EQ(st.dropped, 2 * dropped);
  EXPECT_EQ(st.aux_terms, 2 * kB);
  st.reset(E);
  EXPECT_EQ(st.assignments, 0);
  EXPECT_EQ(st.kept, std::vector<int64_t>(E, 0));
}

// ---- (e) bf16: the router and the combine in fp32 (Switch's selective precision) ---------------

/// t's elements widened to fp32 (t on the CPU, any dtype).
std::vector<float> widened(const Tensor& t) {
  std::vector<float> f(t.numel());
  cpu::widen(t.raw(), t.dtype(), f.data(), t.numel());
  return f;
}

TEST(MoeInBf16, RoutesAndCombinesInFp32OnTheStoredBf16Activations) {
  MoeBlock s(2, 1.0);
  const int C = s.cfg.d, E = s.cfg.experts, k = 2, n = kB * kT;
  // The parameters as a 16-bit walk reads them (FlatParams: bf16 values widened), the input bf16.
  std::vector<uint16_t> p16(s.params.size());
  cpu::round_to(s.params.data(), p16.data(), DType::kBF16, p16.size());
  cpu::widen(p16.data(), DType::kBF16, s.params.data(), p16.size());
  const GPT m(s.cfg, TpComm::none(), DType::kBF16);
  const Tensor x32 = random_input(9);
  Tensor x = Tensor::empty(x32.shape(), DType::kBF16, MemCategory::kActivations);
  cpu::round_to(x32.f32(), x.raw(), DType::kBF16, x.numel());
  // The walk's declaration (unit_runner.cc): every other product's operands are bf16 values,
  // which the CPU checks operand by operand; the layer's fp32 ones must declare themselves.
  const MatmulOperands bf16_operands(kernel_ops(Device::kCPU), DType::kBF16);
  BlockCache cache;
  const Tensor out = m.block_forward(kLayer, s.unit(), x, kB, kT, &cache);
  const MoeCache& c = cache.moe;
  EXPECT_EQ(out.dtype(), DType::kBF16);
  EXPECT_EQ(c.ln2.dtype(), DType::kBF16) << "ln_2's output is a kept activation";
  EXPECT_EQ(c.x.dtype(), DType::kBF16) << "the dispatched rows travel in 16 bits";
  EXPECT_EQ(c.yg.dtype(), DType::kBF16);
  EXPECT_EQ(c.gates.dtype(), DType::kF32);
  // The router in fp32 on the stored ln2: z = widen(ln2) @ W_router, no rounding of z.
  const std::vector<float> ln2 = widened(c.ln2);
  std::vector<float> z(static_cast<size_t>(n) * E);
  cpu::matmul_forward(z.data(), ln2.data(), s.at("h.1.mlp.router.weight"), nullptr, n, C, E);
  const Routing r = route(z.data(), n, E, k, kT, s.cfg.capacity_factor);
  EXPECT_EQ(r.expert, c.routing.expert);
  EXPECT_EQ(r.gate, c.routing.gate) << "the gates are not those of an fp32 router";
  // ... and the same gates from a router whose logits were rounded to bf16 differ: the check
  // above can tell.
  std::vector<uint16_t> z16(z.size());
  std::vector<float> zr(z.size());
  cpu::round_to(z.data(), z16.data(), DType::kBF16, z.size());
  cpu::widen(z16.data(), DType::kBF16, zr.data(), z.size());
  EXPECT_NE(route(zr.data(), n, E, k, kT, s.cfg.capacity_factor).gate, c.routing.gate);
  // The combine: out[t] = bf16(res1[t] + g(t) @ Yg[t]) in fp32, the gates unrounded (the
  // layer's one strided-batched product over the tokens, β = 1 onto res1).
  const std::vector<float> yg = widened(c.yg);
  std::vector<float> want = widened(cache.res1);
  cpu::gemm_strided_batched(false, false, 1, C, k, 1.0f, r.gate.data(), k, k, yg.data(), C,
                            int64_t{k} * C, 1.0f, want.data(), C, C, n);
  std::vector<uint16_t> want16(want.size());
  cpu::round_to(want.data(), want16.data(), DType::kBF16, want.size());
  EXPECT_EQ(std::memcmp(out.raw(), want16.data(), want16.size() * 2), 0)
      << "out is not the fp32 combine rounded once";
  // The backward under the same declaration: its router and combine products are fp32.
  m.moe()->set_loss_scale(1.0f / (kB * kT));
  Tensor dy = Tensor::empty(out.shape(), DType::kBF16, MemCategory::kActivations);
  const Tensor dy32 = random_input(10);
  cpu::round_to(dy32.f32(), dy.raw(), DType::kBF16, dy.numel());
  std::vector<float> g(m.layout().unit_numel(1 + kLayer), 0.0f);
  const Tensor dx = m.block_backward(kLayer, s.unit(), x, &cache, dy, g.data());
  EXPECT_EQ(dx.dtype(), DType::kBF16);
  const ParamSpec& router = m.layout().find("h.1.mlp.router.weight");
  const int64_t ro = router.offset - m.layout().unit_offset(1 + kLayer);
  double norm = 0;
  for (int64_t i = 0; i < router.numel; ++i) norm += std::abs(g[ro + i]);
  EXPECT_GT(norm, 0.0) << "the router got no gradient";
}

}  // namespace
}  // namespace llmp
