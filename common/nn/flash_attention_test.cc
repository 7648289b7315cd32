// Flash attention (flash_attention.h) against the materialized attention it replaces, on the CPU:
//   - the two functions against kernels/cpu/attention.h's forward and backward on random inputs
//     (out, dqkv), and lse against log Σ exp of the scores taken in double;
//   - the whole walk: loss and gradients of the tiny model against the materialized walk's, in
//     fp32 and with bf16 activations;
//   - the memory, measured: the bytes a block keeps (MemoryTracker, through RecomputeMeter) equal
//     recompute_formulas.h's closed form with lse for P, and the peak of the T×T buffers
//     (MemTag::kAttentionScores) is two T×T fp32 workspaces, whatever L, B and H;
//   - an odd T is refused by name.
// The device path: common/nn:gpt_device_test (the walk with --attention flash on the FakeDevice).
#include "common/nn/flash_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/random_ids.h"
#include "common/nn/unit_runner.h"
#include "common/plan/recompute_formulas.h"
#include "common/tensor/memory.h"
#include "common/testing/max_or_nan.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/convert.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

std::vector<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

Tensor tensor_of(const std::vector<float>& v, std::vector<int64_t> shape) {
  Tensor t = Tensor::empty(std::move(shape));
  std::memcpy(t.f32(), v.data(), v.size() * sizeof(float));
  return t;
}

/// max |a − b| / max(1, max |b|); infinity when a value is not finite (std::max would skip NaN).
double rel_err(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - b[i]);
    if (!std::isfinite(d)) return INFINITY;
    diff = testing::max_or_nan(diff, d);
    scale = testing::max_or_nan(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

// fp32 sums of up to T terms in another order: a few ulps of each result, ~T·2⁻²⁴ relative in
// the worst case (1.4e-6 at T = 24); 2e-5 leaves room and still fails on any wrong index.
constexpr double kBound = 2e-5;

TEST(FlashAttention, FunctionsEqualTheMaterializedKernels) {
  const int B = 2, H = 4, A = 32, hs = A / H;
  for (int T : {2, 16, 24}) {
    const int64_t nqkv = int64_t{B} * T * 3 * A, nout = int64_t{B} * T * A;
    // Scores of a few units: q and k scaled so that the softmax is neither flat nor one-hot.
    std::vector<float> qkv = normal(nqkv, 11 + T), dout = normal(nout, 12 + T);
    for (float& x : qkv) x *= 1.5f;
    std::vector<float> out(nout), att(int64_t{B} * H * T * T), scratch(int64_t{T} * T),
        dqkv(nqkv);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, A, H);
    cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), scratch.data(), B,
                            T, A, H);

    const Tensor q = tensor_of(qkv, {B, T, 3 * A}), dO = tensor_of(dout, {B, T, A});
    const Tensor o = Tensor::empty({B, T, A}), dq = Tensor::empty({B, T, 3 * A});
    // Both outputs start as NaN: the functions OVERWRITE them (O and dQ|dK|dV accumulate inside).
    std::fill(o.f32(), o.f32() + nout, NAN);
    std::fill(dq.f32(), dq.f32() + nqkv, NAN);
    const Tensor lse = flash_attention_forward(q, o, B, T, H);
    flash_attention_backward(dq, dO, q, o, lse, B, T, H);
    const double e_out = rel_err(o.f32(), out.data(), nout);
    const double e_dqkv = rel_err(dq.f32(), dqkv.data(), nqkv);
    // lse = log Σ_{j ≤ i} exp(q_i·k_j/√hs), in double from qkv: what the backward's P rests on.
    double e_lse = 0;
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < T; ++i) {
          const float* qi = &qkv[(int64_t{b} * T + i) * 3 * A + h * hs];
          double sum = 0;
          for (int j = 0; j <= i; ++j) {
            const float* kj = &qkv[(int64_t{b} * T + j) * 3 * A + A + h * hs];
            double s = 0;
            for (int c = 0; c < hs; ++c) s += double(qi[c]) * kj[c];
            sum += std::exp(s / std::sqrt(double(hs)));
          }
          const double got = lse.f32()[(int64_t{b} * H + h) * T + i];
          e_lse = testing::max_or_nan(e_lse, std::fabs(got - std::log(sum)) / std::max(1.0, std::log(sum)));
        }
    std::printf("T=%2d: out %.2e, dqkv %.2e, lse %.2e (max |err| / max(1, max |ref|))\n", T,
                e_out, e_dqkv, e_lse);
    EXPECT_LE(e_out, kBound) << "T=" << T;
    EXPECT_LE(e_dqkv, kBound) << "T=" << T;
    EXPECT_LE(e_lse, kBound) << "T=" << T;
  }
}

struct Walked {
  double loss = 0;
  std::vector<float> grads;
  double block_bytes = 0;
  int64_t score_peak = 0;
};

/// One forward_backward of the tiny model (L blocks, B sequences of T), parameters fp32.
Walked walk(AttentionMethod method, DType act = DType::kF32, int L = 2, int B = 2, int T = 16) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.layers = L;
  cfg.attention = method;
  const GPT model(cfg, TpComm::none(), act);
  std::vector<float> params(model.layout().num_params());
  model.init_params(params.data(), 7);
  const auto tok = random_ids(B * T, 1, cfg.vocab), tgt = random_ids(B * T, 2, cfg.vocab);
  Walked w;
  w.grads.assign(params.size(), 0.0f);
  RecomputeMeter::instance().reset();
  MemoryTracker::instance().reset_peak();
  w.loss = forward_backward(model, params.data(), w.grads.data(), tok.data(), tgt.data(), B, T,
                            1.0f / (B * T));
  w.block_bytes = RecomputeMeter::instance().bytes_per_block();
  w.score_peak = MemoryTracker::instance().peak(MemTag::kAttentionScores);
  return w;
}

TEST(FlashAttention, TheWalkTrainsAsTheMaterializedOne) {
  const Walked mat = walk(AttentionMethod::kMaterialized),
               flash = walk(AttentionMethod::kFlash);
  const int64_t n = static_cast<int64_t>(mat.grads.size());
  const double e = rel_err(flash.grads.data(), mat.grads.data(), n);
  std::printf("fp32: loss %.9g vs %.9g, gradients %.2e\n", flash.loss, mat.loss, e);
  EXPECT_NEAR(flash.loss, mat.loss, 1e-6 * std::fabs(mat.loss));
  EXPECT_LE(e, kBound);

  // bf16 activations: the materialized walk rounds P and dS to bf16 before their products
  // (sublayer.h rounded_products), flash attention keeps them fp32 inside its kernels; both are
  // bf16 walks of the same model, so each stays within bf16's precision of the fp32 walk.
  // Bound: 2⁻⁸, one bf16 step relative to the largest gradient (both measured near 1e-3).
  const Walked mat16 = walk(AttentionMethod::kMaterialized, DType::kBF16),
               flash16 = walk(AttentionMethod::kFlash, DType::kBF16);
  const double e_mat16 = rel_err(mat16.grads.data(), mat.grads.data(), n),
               e_flash16 = rel_err(flash16.grads.data(), mat.grads.data(), n);
  std::printf("bf16 vs fp32: materialized %.2e, flash %.2e; losses %.6f, %.6f, fp32 %.6f\n",
              e_mat16, e_flash16, mat16.loss, flash16.loss, mat.loss);
  EXPECT_LE(e_flash16, 1.0 / 256);
  EXPECT_NEAR(flash16.loss, mat.loss, 1.0 / 256 * std::fabs(mat.loss));
  EXPECT_NE(flash16.grads, flash.grads) << "the bf16 walk stored its activations in bf16";
}

TEST(FlashAttention, KeepsTheRowLogSumExpNotTheProbabilities) {
  const GPTConfig tiny = GPTConfig::preset("tiny");
  const int B = 2, T = 16;
  for (int L : {2, 4}) {
    const Walked mat = walk(AttentionMethod::kMaterialized, DType::kF32, L, B, T),
                 flash = walk(AttentionMethod::kFlash, DType::kF32, L, B, T);
    RecomputeDims d{B, T, tiny.d, tiny.heads, L};
    const double with_p = activation_bytes_per_block(d, Recompute::kNone, 1, 4);
    d.flash = true;
    const double with_lse = activation_bytes_per_block(d, Recompute::kNone, 1, 4);
    std::printf("L=%d: per block %.0f B kept (formula %.0f) vs %.0f (formula %.0f); T×T peak "
                "%lld B vs %lld B\n",
                L, flash.block_bytes, with_lse, mat.block_bytes, with_p,
                static_cast<long long>(flash.score_peak), static_cast<long long>(mat.score_peak));
    EXPECT_EQ(flash.block_bytes, with_lse);
    EXPECT_EQ(mat.block_bytes, with_p);
    EXPECT_EQ(with_p - with_lse, 4.0 * B * tiny.heads * T * (T - 1)) << "P (B,H,T,T) for lse";
    // The T×T buffers: the backward's P and dS of one (b, h) at a time, never L·B·H of them.
    EXPECT_EQ(flash.score_peak, 2 * 4 * T * T);
    EXPECT_GE(mat.score_peak, int64_t{4} * L * B * tiny.heads * T * T);
  }
}

// Mixed precision as the trainers run it: bf16 parameters and activations, so the walk declares
// its products' operands bf16 (kernel_ops.h MatmulOperands) and a GPU runs the blockwise kernels
// on bf16 tensor cores (kernels/cuda/attention_block_tc.h). The CPU table checks the promise:
// every q, k, v and dO value the flash path hands those kernels is a bf16 value.
TEST(FlashAttention, UnderABf16DeclarationItsOperandsAreBf16Values) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.attention = AttentionMethod::kFlash;
  const GPT model(cfg, TpComm::none(), DType::kBF16);
  const int64_t n = model.layout().num_params();
  const int B = 2, T = 16;
  std::vector<float> init(n);
  model.init_params(init.data(), 7);
  Tensor params = Tensor::empty({n}, DType::kBF16, MemCategory::kParameters);
  cpu::round_to(init.data(), params.raw(), DType::kBF16, n);
  Tensor grads = Tensor::zeros({n}, DType::kBF16, MemCategory::kGradients);
  const auto tok = random_ids(B * T, 1, cfg.vocab), tgt = random_ids(B * T, 2, cfg.vocab);
  FlatParams fp(model.layout(), params);
  FlatGrads fg(model.layout(), grads);
  UnitRunner runner(model, fp, &fg);
  const double loss = runner.forward_backward(tok.data(), tgt.data(), B, T, 1.0f / (B * T));
  EXPECT_TRUE(std::isfinite(loss));
  // The check itself: a q that is not a bf16 value, under the declaration, is refused by name.
  KernelOps& ops = kernel_ops(Device::kCPU);
  const MatmulOperands declared(ops, DType::kBF16);
  const int H = 2, hs = 16, A = H * hs;
  std::vector<float> qkv(int64_t{B} * T * 3 * A, 0.5f), o(int64_t{B} * T * A, 0.0f),
      m(B * H * T, -INFINITY), l(B * H * T, 0.0f), S(T * T);
  qkv[3] = 0.1f;  // not a bf16 value
  try {
    ops.attention_block_forward(o.data(), A, m.data(), l.data(), S.data(), qkv.data(), 3 * A,
                                qkv.data() + A, qkv.data() + 2 * A, 3 * A, B, H, T, hs,
                                {{{cpu::ChunkPair::kDiagonal, cpu::ChunkPair::kSkip},
                                  {cpu::ChunkPair::kFull, cpu::ChunkPair::kDiagonal}}});
    FAIL() << "a q of 0.1 passed as a bf16 operand";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("attention_block_forward: q[3]"), std::string::npos)
        << e.what();
  }
}

TEST(FlashAttention, AnOddSequenceIsRefusedByName) {
  try {
    walk(AttentionMethod::kFlash, DType::kF32, 2, 2, 15);
    FAIL() << "T=15 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("T=15 is odd"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_attention("flash"), AttentionMethod::kFlash);
  EXPECT_STREQ(to_string(parse_attention("materialized")), "materialized");
  EXPECT_THROW(parse_attention("sparse"), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
