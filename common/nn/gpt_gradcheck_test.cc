// Finite-difference gradient checks of the GPT on the `tiny` preset: each unit function
// (embed, block, head) and the whole model, sampling entries of EVERY parameter tensor.
//
// Analytic gradients come from the backward passes; numerical ones are central differences of a
// scalar loss computed in f32 and summed in double (kernels/cpu/grad_check.h). For the unit
// functions the scalar is L = Σ out ⊙ R with a fixed random R; for the model it is the summed
// cross-entropy (loss_scale = 1). Parameters are GPT-2's init plus uniform noise so no gradient is
// trivially zero (biases and LayerNorm gains move off 0 and 1). Each check samples the entries
// with the largest |gradient| (where a wrong term shows clearly above f32 noise) and random ones.
//
// Glossary: B batch, T sequence, C channels, R random cotangent, ε finite-difference step.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/init.h"
#include "common/nn/unit_runner.h"
#include "kernels/cpu/grad_check.h"

namespace llmp {
namespace {
using testing::GradCheckResult;

constexpr float kEps = 1e-2f;
constexpr double kFloor = 1e-2;  // |g| below this is compared in absolute terms
constexpr double kTol = 2e-2;

class TinyGradCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    params.resize(lay.num_params());
    m.init_params(params.data(), 7);
    for (int64_t i = 0; i < lay.num_params(); ++i)
      params[i] += static_cast<float>(0.2 * (uniform_at(99, i) - 0.5));  // ±0.1
    for (int i = 0; i < B * T; ++i) {
      tok[i] = static_cast<int32_t>(uniform_at(5, i) * 256) % 256;
      tgt[i] = static_cast<int32_t>(uniform_at(6, i) * 256) % 256;
    }
  }
  std::vector<float> rand_vec(int64_t n, uint64_t seed) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(2 * uniform_at(seed, i) - 1);
    return v;
  }
  /// A (B,T,C) activation tensor holding `v`.
  Tensor act(const std::vector<float>& v) const {
    Tensor t = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
    std::copy(v.begin(), v.end(), t.f32());
    return t;
  }
  static double dot(const Tensor& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < b.size(); ++i) s += static_cast<double>(a.f32()[i]) * b[i];
    return s;
  }
  /// Checks grad against `loss` at sampled entries of p[0..n); prints and asserts.
  GradCheckResult check(const std::string& name, float* p, const float* grad, int64_t n,
                        const std::function<double()>& loss) {
    const auto idx = testing::sample_indices(grad, n, 4, 4, n + name.size());
    const GradCheckResult r = testing::check_grad_at(p, grad, idx, loss, kEps, kFloor);
    testing::print_result(name, r);
    EXPECT_LT(r.max_rel_err, kTol) << name;
    return r;
  }
  /// One check per parameter tensor of `unit`; returns the worst.
  GradCheckResult check_unit(int unit, float* p, const float* g, const std::string& prefix,
                             const std::function<double()>& loss) {
    GradCheckResult worst;
    for (const ParamSpec& s : lay.params()) {
      if (s.unit != unit) continue;
      const int64_t o = s.offset - lay.unit_offset(unit);
      testing::merge(&worst, check(prefix + s.name, p + o, g + o, s.numel, loss));
    }
    return worst;
  }

  const GPT m{GPTConfig::preset("tiny")};
  const GPTLayout& lay = m.layout();
  const int B = 2, T = 8, C = 32, V = 256;
  std::vector<float> params;
  std::vector<int32_t> tok = std::vector<int32_t>(B * T), tgt = std::vector<int32_t>(B * T);
};

TEST_F(TinyGradCheck, EmbedUnit) {
  float* P0 = params.data() + lay.unit_offset(0);
  const auto R = rand_vec(B * T * C, 11);
  std::vector<float> g(lay.unit_numel(0), 0.f);
  auto loss = [&] { return dot(m.embed_forward(P0, tok.data(), B, T), R); };
  m.embed_backward(tok.data(), B, T, act(R), g.data());
  check_unit(0, P0, g.data(), "embed ", loss);
}

TEST_F(TinyGradCheck, BlockUnit) {
  for (int l = 0; l < 2; ++l) {
    float* P = params.data() + lay.unit_offset(1 + l);
    Tensor x = act(rand_vec(B * T * C, 12 + l));
    const auto R = rand_vec(B * T * C, 14 + l);
    std::vector<float> g(lay.unit_numel(1 + l), 0.f);
    auto loss = [&] {
      BlockCache c;
      return dot(m.block_forward(l, P, x, B, T, &c), R);
    };
    BlockCache cache;
    m.block_forward(l, P, x, B, T, &cache);
    const Tensor dx = m.block_backward(l, P, x, &cache, act(R), g.data());
    check("block dx_in", x.f32(), dx.f32(), B * T * C, loss);
    check_unit(1 + l, P, g.data(), "block ", loss);
  }
}

TEST_F(TinyGradCheck, HeadUnit) {
  const float scale = 0.37f;
  float* lnf = params.data() + lay.unit_offset(3);
  float* wte = params.data() + lay.find("wte.weight").offset;
  Tensor x = act(rand_vec(B * T * C, 16));
  std::vector<float> glnf(2 * C, 0.f), gwte(V * C, 0.f);
  auto loss = [&] {
    return m.head_forward_backward(lnf, wte, x, tgt.data(), B, T, scale, nullptr, nullptr,
                                   nullptr);
  };
  Tensor dx;
  const double l = m.head_forward_backward(lnf, wte, x, tgt.data(), B, T, scale, &dx,
                                           glnf.data(), gwte.data());
  EXPECT_NEAR(l, loss(), 1e-9);
  check("head dx", x.f32(), dx.f32(), B * T * C, loss);
  check_unit(3, lnf, glnf.data(), "head ", loss);
  check("head wte.weight (tied)", wte, gwte.data(), V * C, loss);
}

TEST_F(TinyGradCheck, WholeModel) {
  std::vector<float> grads(lay.num_params(), 0.f);
  forward_backward(m, params.data(), grads.data(), tok.data(), tgt.data(), B, T, 1.0f);
  auto loss = [&] { return forward_loss(m, params.data(), tok.data(), tgt.data(), B, T) * B * T; };
  GradCheckResult worst;
  for (int u = 0; u < lay.num_units(); ++u) {
    const int64_t o = lay.unit_offset(u);
    testing::merge(&worst, check_unit(u, params.data() + o, grads.data() + o, "model ", loss));
  }
  testing::print_result("WHOLE MODEL (worst)", worst);
}

}  // namespace
}  // namespace llmp
