// The whole-model contracts of gpt.h and unit_runner.h: forward_backward is the composition of
// the unit functions, announces units L+1, L, ..., 0 exactly when their gradients are final,
// accumulates into grads, and honours loss_scale (two half-batches = one batch); the block
// backward is its B and W halves (bit for bit); the recompute hook gives bit-identical gradients
// with fewer activations; loss at init ≈ ln V; activations are counted as
// MemCategory::kActivations and released; bad inputs throw naming the values.
//
// Glossary: B batch, T sequence, C channels, V vocab, L layers, Ψ parameter count.
#include "common/nn/gpt.h"
#include "common/nn/random_ids.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "common/nn/unit_runner.h"
#include "common/tensor/memory.h"
#include "common/testing/max_or_nan.h"

namespace llmp {
namespace {

/// max_i |a_i - b_i| / max_i |b_i|: differences relative to the gradient's scale.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = testing::max_or_nan(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    s = testing::max_or_nan(s, std::fabs(static_cast<double>(b[i])));
  }
  return d / s;
}

struct Model {
  explicit Model(const char* preset, int B_, int T_) : m(GPTConfig::preset(preset)), B(B_), T(T_) {
    params.resize(m.layout().num_params());
    m.init_params(params.data(), 1234);
    tok = random_ids(B * T, 1, m.config().vocab);
    tgt = random_ids(B * T, 2, m.config().vocab);
  }
  GPT m;
  int B, T;
  std::vector<float> params;
  std::vector<int32_t> tok, tgt;
};

TEST(GPT, ForwardBackwardIsTheUnitComposition) {
  Model s("tiny", 2, 16);
  const GPT& m = s.m;
  const GPTLayout& lay = m.layout();
  const int L = m.config().layers, B = s.B, T = s.T;
  const float scale = 1.0f / (B * T);
  const float* P = s.params.data();
  std::vector<float> g1(lay.num_params(), 0.f), g2(lay.num_params(), 0.f);

  // forward_backward, recording the announcement order and a snapshot of each unit's gradients.
  std::vector<int> order;
  std::vector<std::vector<float>> at_announce(lay.num_units());
  const double loss1 =
      forward_backward(m, P, g1.data(), s.tok.data(), s.tgt.data(), B, T, scale, [&](int u) {
        order.push_back(u);
        const float* g = g1.data() + lay.unit_offset(u);
        at_announce[u].assign(g, g + lay.unit_numel(u));
      });
  std::vector<int> expected;
  for (int u = L + 1; u >= 0; --u) expected.push_back(u);
  EXPECT_EQ(order, expected);
  for (int u = 0; u < lay.num_units(); ++u) {  // final when announced: nothing changed after
    const float* g = g1.data() + lay.unit_offset(u);
    EXPECT_TRUE(std::equal(at_announce[u].begin(), at_announce[u].end(), g)) << "unit " << u;
  }

  // The same by hand with the unit functions (activations are 64-byte aligned Tensors in both,
  // so the comparison is exact: Eigen peels unaligned heads of its vectorised loops).
  auto U = [&](int u) { return P + lay.unit_offset(u); };
  std::vector<Tensor> xs{m.embed_forward(U(0), s.tok.data(), B, T)};
  std::vector<BlockCache> caches(L);
  for (int l = 0; l < L; ++l) xs.push_back(m.block_forward(l, U(1 + l), xs[l], B, T, &caches[l]));
  Tensor dx;
  const double loss2 = m.head_forward_backward(U(L + 1), P, xs[L], s.tgt.data(), B, T, scale, &dx,
                                               g2.data() + lay.unit_offset(L + 1), g2.data());
  for (int l = L - 1; l >= 0; --l)
    dx = m.block_backward(l, U(1 + l), xs[l], &caches[l], dx, g2.data() + lay.unit_offset(1 + l));
  m.embed_backward(s.tok.data(), B, T, dx, g2.data());
  EXPECT_EQ(loss1, loss2);
  EXPECT_EQ(g1, g2);
  // forward_loss is the mean of the same losses.
  EXPECT_NEAR(forward_loss(m, P, s.tok.data(), s.tgt.data(), B, T), loss1, 1e-6 * loss1);
}

TEST(GPT, BlockBackwardIsItsInputAndWeightHalves) {
  // Zero bubble must not change the math: B then W (later) equals block_backward bit for bit,
  // B touches no weight gradient, and B frees what W does not need.
  Model s("tiny", 2, 16);
  const GPT& m = s.m;
  const int B = s.B, T = s.T, C = m.config().d;
  const float* bp = s.params.data() + m.layout().unit_offset(1);
  const int64_t nb = m.layout().unit_numel(1);
  Tensor x = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
  Tensor dy = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.f32()[i] = std::sin(0.37 * i), dy.f32()[i] = std::cos(0.11 * i);

  BlockCache cache;
  std::vector<float> g_ref(nb, 0.0f), g(nb, 0.0f);
  m.block_forward(0, bp, x, B, T, &cache);
  const Tensor dx_ref = m.block_backward(0, bp, x, &cache, dy, g_ref.data());
  EXPECT_FALSE(cache.filled()) << "block_backward frees the cache";

  BlockCache cache2;
  BlockGradCache keep;
  m.block_forward(0, bp, x, B, T, &cache2);
  const Tensor dx = m.block_backward_input(0, bp, x, &cache2, dy, &keep);
  EXPECT_FALSE(cache2.attn.att.defined()) << "B frees attention's probabilities";
  EXPECT_FALSE(cache2.attn.qkv.defined());
  EXPECT_FALSE(cache2.mlp.fch.defined());
  EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; }))
      << "B must not touch the weight gradients";
  m.block_backward_weight(0, bp, x, cache2, keep, g.data());
  EXPECT_TRUE(std::equal(dx.f32(), dx.f32() + dx.numel(), dx_ref.f32()));
  EXPECT_EQ(g, g_ref);
  EXPECT_THROW(m.block_backward(0, bp, x, &cache, dy, g.data()), std::invalid_argument)
      << "a used cache is refused";
}

TEST(GPT, RecomputeHookGivesTheSameGradientsWithFewerActivations) {
  Model s("tiny", 2, 16);
  const GPTLayout& lay = s.m.layout();
  const int B = s.B, T = s.T;
  auto& mt = MemoryTracker::instance();
  auto run = [&](std::function<bool(int)> keep, int64_t* peak, int* recomputed) {
    std::vector<float> g(lay.num_params(), 0.f);
    FlatParams p(lay, s.params.data());
    FlatGrads fg(lay, g.data());
    UnitRunner runner(s.m, p, &fg);
    if (keep) runner.set_keep_activations(keep);
    const int64_t before = mt.current(MemCategory::kActivations);
    mt.reset_peak();
    runner.forward_backward(s.tok.data(), s.tgt.data(), B, T, 1.0f / (B * T));
    *peak = mt.peak(MemCategory::kActivations) - before;
    *recomputed = runner.stats().recomputed_blocks;
    return g;
  };
  int64_t peak_keep = 0, peak_recompute = 0;
  int r_keep = -1, r_recompute = -1;
  const auto g_keep = run({}, &peak_keep, &r_keep);
  const auto g_recompute = run([](int) { return false; }, &peak_recompute, &r_recompute);
  std::printf("activation peak: keep %lld bytes, recompute every block %lld bytes\n",
              static_cast<long long>(peak_keep), static_cast<long long>(peak_recompute));
  EXPECT_EQ(g_keep, g_recompute);  // bit-identical: the same forward runs again
  EXPECT_EQ(r_keep, 0);
  EXPECT_EQ(r_recompute, s.m.config().layers);
  EXPECT_LT(peak_recompute, peak_keep);
}

TEST(GPT, GradientsAccumulate) {
  Model s("tiny", 2, 16);
  const int64_t n = s.m.layout().num_params();
  std::vector<float> once(n, 0.f), twice(n, 0.f);
  forward_backward(s.m, s.params.data(), once.data(), s.tok.data(), s.tgt.data(), 2, 16, 0.5f);
  for (int k = 0; k < 2; ++k)
    forward_backward(s.m, s.params.data(), twice.data(), s.tok.data(), s.tgt.data(), 2, 16, 0.5f);
  for (float& g : once) g *= 2;
  EXPECT_LT(max_rel_diff(twice, once), 1e-6);
}

TEST(GPT, LossAtInitIsLnV) {
  Model s("mini", 4, 64);
  const double loss = forward_loss(s.m, s.params.data(), s.tok.data(), s.tgt.data(), 4, 64);
  std::printf("mini loss at init %.4f (ln 256 = %.4f)\n", loss, std::log(256.0));
  EXPECT_NEAR(loss, std::log(256.0), 0.1);
}

TEST(GPT, LossScaleSplitsABatch) {
  Model s("mini", 8, 64);
  const int B = 8, T = 64, half = B / 2;
  const float scale = 1.0f / (B * T);
  const int64_t n = s.m.layout().num_params();
  std::vector<float> full(n, 0.f), halves(n, 0.f);
  const double lf =
      forward_backward(s.m, s.params.data(), full.data(), s.tok.data(), s.tgt.data(), B, T, scale);
  double lh = 0;
  for (int k = 0; k < 2; ++k)
    lh += forward_backward(s.m, s.params.data(), halves.data(), s.tok.data() + k * half * T,
                               s.tgt.data() + k * half * T, half, T, scale);
  const double dg = max_rel_diff(halves, full);
  std::printf("full %.9f halves %.9f, largest grad diff / largest grad %.3e\n", lf, lh, dg);
  EXPECT_NEAR(lh, lf, 1e-6 * lf);
  EXPECT_LT(dg, 1e-6);
}

/// Peak activation bytes of forward_backward, the closed form of README.md:
///   4·[ L·(15NC + 4N + BHT²) + (L+1)·NC + max(3NC + 2N + 3R + R·V, 4NC) ],  R = min(N, 2²²/V)
/// (caches of all layers, x_0..x_L or x_0..x_{L-1} and dy, then the larger of the head's
/// temporaries and the first block backward's MLP workspace). N = B·T.
int64_t activation_peak_bytes(const GPTConfig& c, int64_t B, int64_t T) {
  const int64_t N = B * T, NC = N * c.d, L = c.layers;
  const int64_t R = std::min<int64_t>(N, std::max<int64_t>(1, (int64_t{1} << 22) / c.vocab));
  const int64_t cache = 15 * NC + 4 * N + B * c.heads * T * T;
  return 4 * (L * cache + (L + 1) * NC + std::max(3 * NC + 2 * N + 3 * R + R * c.vocab, 4 * NC));
}

TEST(GPT, ActivationMemoryMatchesTheClosedFormAndIsReleased) {
  for (auto [preset, B, T] : {std::tuple{"tiny", 2, 16}, std::tuple{"mini", 8, 64}}) {
    Model s(preset, B, T);
    auto& mt = MemoryTracker::instance();
    const int64_t before = mt.current(MemCategory::kActivations);
    mt.reset_peak();
    std::vector<float> g(s.m.layout().num_params(), 0.f);
    forward_backward(s.m, s.params.data(), g.data(), s.tok.data(), s.tgt.data(), B, T, 1.f);
    const int64_t peak = mt.peak(MemCategory::kActivations) - before;
    std::printf("%s B=%d T=%d: peak activations %lld bytes (closed form %lld)\n", preset, B, T,
                static_cast<long long>(peak),
                static_cast<long long>(activation_peak_bytes(s.m.config(), B, T)));
    EXPECT_EQ(peak, activation_peak_bytes(s.m.config(), B, T)) << preset;
    EXPECT_EQ(mt.current(MemCategory::kActivations), before) << preset;  // all released
  }
  Model s("tiny", 2, 16);
  BlockCache c;
  Tensor x = Tensor::empty({2, 16, 32}, DType::kF32, MemCategory::kActivations);
  x.fill(0.1f);
  s.m.block_forward(0, s.params.data() + s.m.layout().unit_offset(1), x, 2, 16, &c);
  for (const Tensor* t : {&c.attn.ln1, &c.attn.ln1_mean, &c.attn.ln1_rstd, &c.attn.qkv, &c.attn.att,
                          &c.attn.atty, &c.res1, &c.mlp.ln2, &c.mlp.ln2_mean, &c.mlp.ln2_rstd,
                          &c.mlp.fch, &c.mlp.fch_gelu})
    EXPECT_EQ(t->category(), MemCategory::kActivations);
  EXPECT_EQ(c.attn.att.shape(), (std::vector<int64_t>{2, 2, 16, 16}));
  EXPECT_EQ(c.bytes(), 4 * (15 * 32 * 32 + 4 * 32 + 2 * 2 * 16 * 16));  // 15NC + 4N + BHT²
}

TEST(GPT, BadInputsThrowNamingTheValues) {
  Model s("tiny", 2, 16);
  std::vector<float> g(s.m.layout().num_params(), 0.f);
  try {
    forward_backward(s.m, s.params.data(), g.data(), s.tok.data(), s.tgt.data(), 1, 32, 1.f);
    FAIL() << "T > ctx accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("T=32"), std::string::npos) << e.what();
  }
  s.tok[5] = 300;
  try {
    forward_loss(s.m, s.params.data(), s.tok.data(), s.tgt.data(), 2, 16);
    FAIL() << "token 300 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("300"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmp
