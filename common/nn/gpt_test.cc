// The whole-model contracts of gpt.h: forward_backward is the composition of the unit functions,
// announces units L+1, L, ..., 0 exactly when their gradients are final, accumulates into grads,
// and honours loss_scale (two half-batches = one batch); loss at init ≈ ln V; activations are
// counted as MemCategory::kActivations and released; bad inputs throw naming the values.
//
// Glossary: B batch, T sequence, C channels, V vocab, L layers, Ψ parameter count.
#include "common/nn/gpt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "common/nn/init.h"
#include "common/tensor/memory.h"

namespace llmp {
namespace {

std::vector<int32_t> random_ids(int n, uint64_t seed, int V) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<int32_t>(uniform_at(seed, i) * V) % V;
  return v;
}

/// max_i |a_i - b_i| / max_i |b_i|: differences relative to the gradient's scale.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    s = std::max(s, std::fabs(static_cast<double>(b[i])));
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
  const int L = m.config().layers, C = m.config().d, B = s.B, T = s.T;
  const float scale = 1.0f / (B * T);
  const float* P = s.params.data();
  std::vector<float> g1(lay.num_params(), 0.f), g2(lay.num_params(), 0.f);

  // forward_backward, recording the announcement order and a snapshot of each unit's gradients.
  std::vector<int> order;
  std::vector<std::vector<float>> at_announce(lay.num_units());
  const double loss1 =
      m.forward_backward(P, g1.data(), s.tok.data(), s.tgt.data(), B, T, scale, [&](int u) {
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

  // The same by hand with the unit functions. The buffers are Tensors (64-byte aligned) like
  // forward_backward's own: Eigen peels unaligned heads of its vectorised loops, so the same math
  // on differently aligned buffers may differ in the last bit, and this comparison is exact.
  auto act = [&](int64_t n) { return Tensor::empty({n}, DType::kF32, MemCategory::kActivations); };
  std::vector<Tensor> xs;
  for (int l = 0; l <= L; ++l) xs.push_back(act(B * T * C));
  std::vector<BlockCache> caches(L);
  m.embed_forward(P + lay.unit_offset(0), s.tok.data(), B, T, xs[0].f32());
  for (int l = 0; l < L; ++l)
    m.block_forward(P + lay.unit_offset(1 + l), xs[l].f32(), B, T, xs[l + 1].f32(), &caches[l]);
  Tensor dx = act(B * T * C), dx_prev = act(B * T * C);
  const double loss2 =
      m.head_forward_backward(P + lay.unit_offset(L + 1), P, xs[L].f32(), s.tgt.data(), B, T, scale,
                              dx.f32(), g2.data() + lay.unit_offset(L + 1), g2.data());
  for (int l = L - 1; l >= 0; --l) {
    m.block_backward(P + lay.unit_offset(1 + l), xs[l].f32(), caches[l], dx.f32(), dx_prev.f32(),
                     g2.data() + lay.unit_offset(1 + l));
    std::swap(dx, dx_prev);
  }
  m.embed_backward(s.tok.data(), B, T, dx.f32(), g2.data());
  EXPECT_EQ(loss1, loss2);
  EXPECT_EQ(g1, g2);
  // forward_loss is the mean of the same losses.
  EXPECT_NEAR(m.forward_loss(P, s.tok.data(), s.tgt.data(), B, T), loss1, 1e-6 * loss1);
}

TEST(GPT, GradientsAccumulate) {
  Model s("tiny", 2, 16);
  const int64_t n = s.m.layout().num_params();
  std::vector<float> once(n, 0.f), twice(n, 0.f);
  s.m.forward_backward(s.params.data(), once.data(), s.tok.data(), s.tgt.data(), 2, 16, 0.5f);
  for (int k = 0; k < 2; ++k)
    s.m.forward_backward(s.params.data(), twice.data(), s.tok.data(), s.tgt.data(), 2, 16, 0.5f);
  for (float& g : once) g *= 2;
  EXPECT_LT(max_rel_diff(twice, once), 1e-6);
}

TEST(GPT, LossAtInitIsLnV) {
  Model s("mini", 4, 64);
  const double loss = s.m.forward_loss(s.params.data(), s.tok.data(), s.tgt.data(), 4, 64);
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
      s.m.forward_backward(s.params.data(), full.data(), s.tok.data(), s.tgt.data(), B, T, scale);
  double lh = 0;
  for (int k = 0; k < 2; ++k)
    lh += s.m.forward_backward(s.params.data(), halves.data(), s.tok.data() + k * half * T,
                               s.tgt.data() + k * half * T, half, T, scale);
  const double dg = max_rel_diff(halves, full);
  std::printf("full %.9f halves %.9f, largest grad diff / largest grad %.3e\n", lf, lh, dg);
  EXPECT_NEAR(lh, lf, 1e-6 * lf);
  EXPECT_LT(dg, 1e-6);
}

/// Peak activation bytes of forward_backward, the closed form of README.md:
///   4·[ L·(15NC + 4N + BHT²) + (L+3)·NC + max(2NC + 2N + R·V, 5NC + T²) ],  R = min(N, 2²²/V)
/// (caches of all layers, x_0..x_L, dx and dx2, then the larger of the head's temporaries and
/// the first block backward's workspace). N = B·T.
int64_t activation_peak_bytes(const GPTConfig& c, int64_t B, int64_t T) {
  const int64_t N = B * T, NC = N * c.d, L = c.layers;
  const int64_t R = std::min<int64_t>(N, std::max<int64_t>(1, (int64_t{1} << 22) / c.vocab));
  const int64_t cache = 15 * NC + 4 * N + B * c.heads * T * T;
  return 4 * (L * cache + (L + 3) * NC + std::max(2 * NC + 2 * N + R * c.vocab, 5 * NC + T * T));
}

TEST(GPT, ActivationMemoryMatchesTheClosedFormAndIsReleased) {
  for (auto [preset, B, T] : {std::tuple{"tiny", 2, 16}, std::tuple{"mini", 8, 64}}) {
    Model s(preset, B, T);
    auto& mt = MemoryTracker::instance();
    const int64_t before = mt.current(MemCategory::kActivations);
    mt.reset_peak();
    std::vector<float> g(s.m.layout().num_params(), 0.f);
    s.m.forward_backward(s.params.data(), g.data(), s.tok.data(), s.tgt.data(), B, T, 1.f);
    const int64_t peak = mt.peak(MemCategory::kActivations) - before;
    std::printf("%s B=%d T=%d: peak activations %lld bytes (closed form %lld)\n", preset, B, T,
                static_cast<long long>(peak),
                static_cast<long long>(activation_peak_bytes(s.m.config(), B, T)));
    EXPECT_EQ(peak, activation_peak_bytes(s.m.config(), B, T)) << preset;
    EXPECT_EQ(mt.current(MemCategory::kActivations), before) << preset;  // all released
  }
  Model s("tiny", 2, 16);
  BlockCache c;
  std::vector<float> x(32 * 32, 0.1f), y(32 * 32);
  s.m.block_forward(s.params.data() + s.m.layout().unit_offset(1), x.data(), 2, 16, y.data(), &c);
  for (const Tensor* t : {&c.ln1, &c.ln1_mean, &c.ln1_rstd, &c.qkv, &c.att, &c.atty, &c.res1,
                          &c.ln2, &c.ln2_mean, &c.ln2_rstd, &c.fch, &c.fch_gelu})
    EXPECT_EQ(t->category(), MemCategory::kActivations);
  EXPECT_EQ(c.att.shape(), (std::vector<int64_t>{2, 2, 16, 16}));
}

TEST(GPT, BadInputsThrowNamingTheValues) {
  Model s("tiny", 2, 16);
  std::vector<float> g(s.m.layout().num_params(), 0.f);
  try {
    s.m.forward_backward(s.params.data(), g.data(), s.tok.data(), s.tgt.data(), 1, 32, 1.f);
    FAIL() << "T > ctx accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("T=32"), std::string::npos) << e.what();
  }
  s.tok[5] = 300;
  try {
    s.m.forward_loss(s.params.data(), s.tok.data(), s.tgt.data(), 2, 16);
    FAIL() << "token 300 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("300"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmp
