// The model's walk on a device, run without a GPU: GPT::with_device(Device::kCUDA) over a guarded
// FakeDevice (common/testing/fake_device.h: host pages that are unreadable outside device
// operations) with kernels/cpu registered as the device's kernels (fake_kernel_ops.h).
//
// What this proves about the device path, with the kernels held fixed:
//   - every parameter, gradient and activation the walk touches is reached through a kernel of
//     kernel_ops(device) or the device allocator: one host read of device memory anywhere in
//     common/nn ends this test with SIGSEGV (the guarded pages);
//   - nothing else crosses between host and device: the bytes copied each way are exactly the
//     parameters up, the token and target ids up, the gradients down;
//   - the device walk computes what the CPU walk computes, bit for bit (same kernels, same order).
// What it does not prove: that the CUDA kernels (kernels/cuda) equal their CPU twins; that is
// kernels/cuda's tests, which need a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/random_ids.h"
#include "common/nn/unit_runner.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "kernels/cpu/convert.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

struct Result {
  double loss = 0;
  std::vector<float> grads;
};

Tensor host_copy(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())});
  std::memcpy(t.f32(), v.data(), v.size() * sizeof(float));
  return t;
}

/// A walk's inputs: the model's initial parameters (seed 7) and random tokens and targets (B,T).
struct Inputs {
  std::vector<float> params;
  std::vector<int32_t> tok, tgt;
};
Inputs inputs(const GPT& m, int B, int T) {
  Inputs in{std::vector<float>(m.layout().num_params()), random_ids(B * T, 1, m.config().vocab),
            random_ids(B * T, 2, m.config().vocab)};
  m.init_params(in.params.data(), 7);
  return in;
}

class DeviceWalk
    : public ::testing::TestWithParam<std::tuple<Recompute, DType, AttentionMethod>> {};

TEST_P(DeviceWalk, EqualsTheCpuWalkAndMovesOnlyParamsIdsAndGrads) {
  const auto [policy, act, attention] = GetParam();
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.recompute = policy;
  cfg.attention = attention;
  const GPT cpu_model(cfg, TpComm::none(), act);
  const int B = 2, T = 16;
  const int64_t psi = cpu_model.layout().num_params();
  const Inputs in = inputs(cpu_model, B, T);
  const std::vector<float>& params = in.params;
  const std::vector<int32_t>& tok = in.tok;
  const std::vector<int32_t>& tgt = in.tgt;
  const float scale = 1.0f / (B * T);

  Result cpu;
  cpu.grads.assign(psi, 0.0f);
  cpu.loss = forward_backward(cpu_model, params.data(), cpu.grads.data(), tok.data(), tgt.data(), B,
                              T, scale);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = cpu_model.with_device(Device::kCUDA);
  Result gpu;
  {
    Tensor p = Tensor::empty({psi}, DType::kF32, MemCategory::kParameters, Device::kCUDA);
    Tensor g = Tensor::zeros({psi}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
    p.copy_from(host_copy(params));
    const int64_t ops_before = dev.operations();
    gpu.loss = forward_backward(model, p.f32(), g.f32(), tok.data(), tgt.data(), B, T, scale);
    EXPECT_GT(dev.operations() - ops_before, 10 * cfg.layers) << "the kernels ran on the device";
    Tensor back = Tensor::empty({psi});
    back.copy_from(g);
    gpu.grads.assign(back.f32(), back.f32() + psi);
    // Params up; tokens up twice (embed forward and backward), targets once; gradients down.
    EXPECT_EQ(dev.h2d_bytes(), 4 * psi + 3 * 4 * B * T);
    EXPECT_EQ(dev.d2h_bytes(), 4 * psi);
    EXPECT_EQ(dev.in_use(), 8 * psi) << "activations left on the device after the walk";
  }
  EXPECT_EQ(dev.in_use(), 0);
  EXPECT_EQ(gpu.loss, cpu.loss);
  int64_t differing = 0;
  for (int64_t i = 0; i < psi; ++i) differing += gpu.grads[i] != cpu.grads[i];
  EXPECT_EQ(differing, 0) << "of " << psi << " gradient elements";
}

INSTANTIATE_TEST_SUITE_P(PoliciesAndPrecisions, DeviceWalk,
                         ::testing::Values(std::make_tuple(Recompute::kNone, DType::kF32,
                                                           AttentionMethod::kMaterialized),
                                           std::make_tuple(Recompute::kSelective, DType::kF32,
                                                           AttentionMethod::kMaterialized),
                                           std::make_tuple(Recompute::kFull, DType::kF32,
                                                           AttentionMethod::kMaterialized),
                                           std::make_tuple(Recompute::kNone, DType::kBF16,
                                                           AttentionMethod::kMaterialized),
                                           // flash attention (flash_attention.h)
                                           std::make_tuple(Recompute::kNone, DType::kF32,
                                                           AttentionMethod::kFlash),
                                           std::make_tuple(Recompute::kFull, DType::kBF16,
                                                           AttentionMethod::kFlash)));

// Which products the walk hands 16-bit values (sublayer.h rounded_products): under bf16
// activations attention rounds P and dS and the head its dlogits to bf16, also when the
// parameters are fp32 (no 16-bit declaration: the rounding is the model's, not the walk's
// promise); under fp16 nothing is rounded there. What a GPU's kernels are asked is what the
// fake table counts.
TEST(DeviceWalk, Bf16RoundsAttentionAndHeadOperandsAndFp16DoesNot) {
  for (const DType act : {DType::kBF16, DType::kF16}) {
    GPTConfig cfg = GPTConfig::preset("tiny");
    cfg.recompute = Recompute::kSelective;  // attention_probs in the backward too
    const GPT cpu_model(cfg, TpComm::none(), act);
    const int B = 2, T = 16;
    const int64_t psi = cpu_model.layout().num_params();
    const Inputs in = inputs(cpu_model, B, T);
    testing::FakeDevice dev(/*guarded=*/true);
    testing::FakeKernelOps ops(dev);
    const GPT model = cpu_model.with_device(Device::kCUDA);
    Tensor p = Tensor::empty({psi}, DType::kF32, MemCategory::kParameters, Device::kCUDA);
    Tensor g = Tensor::zeros({psi}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
    p.copy_from(host_copy(in.params));
    forward_backward(model, p.f32(), g.f32(), in.tok.data(), in.tgt.data(), B, T,
                     1.0f / (B * T));
    const bool bf16 = act == DType::kBF16;
    const std::string r = bf16 ? " bf16" : " f32", other = bf16 ? " f32" : " bf16";
    const int L = cfg.layers;
    for (const char* e : {"attention_forward", "attention_probs", "attention_backward"}) {
      EXPECT_EQ(ops.calls(e + r), L) << e << r << " under " << to_string(act);
      EXPECT_EQ(ops.calls(e + other), 0) << e << other << " under " << to_string(act);
      EXPECT_EQ(ops.calls(std::string(e) + " f16"), 0) << e << " f16";
    }
    // the head's one logits chunk: its gradient rounded to bf16 values by the loss step
    EXPECT_EQ(ops.calls("cross_entropy_loss" + r), 1) << "the head's one logits chunk";
    EXPECT_EQ(ops.calls("cross_entropy_loss" + other), 0);
  }
}

// A bf16 walk over bf16 parameters (FlatParams) and gradients on the device: every operand of
// its 16-bit products is either an activation handed over as stored (kernel_ops.h Act) or a
// noted widening (F32In's of the head's inputs, FlatParams' of the weights), so a GPU reads them
// in 16 bits and copies none, except the head's dlogits (rounded in place, not a widening).
//   As stored, per block: 4 linear layers × (forward y, x; backward_input dx, dy; backward_weight
// dy, x) = 24 activations, all bf16 but one: MLP's dfch_gelu (c_proj's dx) stays fp32 for
// gelu_backward, which would otherwise read it rounded twice. Attention: out and qkv in the
// forward, dqkv, dY and qkv in the backward = 5, all bf16 (and its P). GELU's backward writes
// dfch in bf16 (1), and both LayerNorm backwards their dx = dres + LN' (2, and 1 in the head).
//   Source hits, per block: the 4 weights in the forward and in backward_input = 8; the head: x
// and wte forward, h and wte in the backward = 4. Each hit is checked against its source bit for
// bit by the fake table, and every note is forgotten by the end of the walk.
TEST(DeviceWalk, SixteenBitProductsReadTheirOperandsInSixteenBits) {
  const GPTConfig cfg = GPTConfig::preset("tiny");
  const GPT cpu_model(cfg, TpComm::none(), DType::kBF16);
  const int B = 2, T = 16;
  const int64_t psi = cpu_model.layout().num_params();
  const Inputs in = inputs(cpu_model, B, T);
  Tensor host16 = Tensor::empty({psi}, DType::kBF16);
  cpu::round_to(in.params.data(), host16.raw(), DType::kBF16, psi);
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = cpu_model.with_device(Device::kCUDA);
  Tensor p16 = Tensor::empty({psi}, DType::kBF16, MemCategory::kParameters, Device::kCUDA);
  Tensor g16 = Tensor::zeros({psi}, DType::kBF16, MemCategory::kGradients, Device::kCUDA);
  p16.copy_from(host16);
  {
    FlatParams source(model.layout(), p16);
    FlatGrads sink(model.layout(), g16);
    UnitRunner walk(model, source, &sink);
    walk.forward_backward(in.tok.data(), in.tgt.data(), B, T, 1.0f / (B * T));
  }
  EXPECT_EQ(ops.calls("linear act bf16"), 23 * cfg.layers);
  EXPECT_EQ(ops.calls("linear act f32"), cfg.layers) << "MLP's dfch_gelu only";
  EXPECT_EQ(ops.calls("attention act bf16"), 5 * cfg.layers);
  EXPECT_EQ(ops.calls("attention act f32"), 0);
  EXPECT_EQ(ops.calls("gelu act bf16"), cfg.layers) << "GELU's backward writes dfch in bf16";
  EXPECT_EQ(ops.calls("layernorm act bf16"), 2 * cfg.layers + 1) << "dx = dres + LN', in bf16";
  EXPECT_EQ(ops.calls("layernorm act f32"), 0);
  EXPECT_EQ(ops.calls("source hit bf16"), 8 * cfg.layers + 4);
  EXPECT_GT(ops.calls("note_source bf16"), 0);
  EXPECT_EQ(ops.noted_sources(), 0u) << "widenings still noted after the walk";
}

TEST(DeviceWalk, AHostReadOfDeviceMemoryIsCaught) {
  // The guard itself: reading a device tensor's element on the host dies (the check above relies
  // on it), while the same read through the allocator's copy is fine.
  testing::FakeDevice dev(/*guarded=*/true);
  Tensor d = Tensor::zeros({16}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  Tensor h = Tensor::empty({16});
  h.copy_from(d);
  EXPECT_EQ(h.f32()[3], 0.0f);
  EXPECT_DEATH(
      {
        volatile float v = d.f32()[3];
        (void)v;
      },
      "");
}

// A mixture of experts on the device: the same loss and gradients bit for bit as on the CPU, and
// besides the dense walk's crossings exactly the routing's, per MoE block (moe.h): the router
// logits down and the gates and the assignments' slots up in the forward, dgate down and dlogits
// up in the backward.
TEST(DeviceWalk, MixtureOfExpertsEqualsTheCpuWalkWithOnlyTheRoutingCrossing) {
  const GPTConfig cfg = GPTConfig::preset("moe-tiny");
  const GPT cpu_model(cfg);
  const int B = 2, T = cfg.ctx;
  const int64_t psi = cpu_model.layout().num_params();
  std::vector<float> params(psi);
  cpu_model.init_params(params.data(), 7);
  const std::vector<int32_t> tok = random_ids(B * T, 1, cfg.vocab),
                             tgt = random_ids(B * T, 2, cfg.vocab);
  const float scale = 1.0f / (B * T);
  std::vector<float> cpu_grads(psi, 0.0f);
  const double cpu_loss = forward_backward(cpu_model, params.data(), cpu_grads.data(), tok.data(),
                                           tgt.data(), B, T, scale);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = cpu_model.with_device(Device::kCUDA);
  std::vector<float> gpu_grads;
  double gpu_loss = 0;
  {
    Tensor p = Tensor::empty({psi}, DType::kF32, MemCategory::kParameters, Device::kCUDA);
    Tensor g = Tensor::zeros({psi}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
    p.copy_from(host_copy(params));
    gpu_loss = forward_backward(model, p.f32(), g.f32(), tok.data(), tgt.data(), B, T, scale);
    Tensor back = Tensor::empty({psi});
    back.copy_from(g);
    gpu_grads.assign(back.f32(), back.f32() + psi);
    const int64_t n = int64_t{B} * T, routing = cfg.moe_blocks() * 4 * n * (cfg.experts + cfg.top_k);
    // Up only: each MoE block's assignment slots, what its token permutations index (4·n·k).
    const int64_t slots = cfg.moe_blocks() * 4 * n * cfg.top_k;
    ASSERT_GT(cfg.moe_blocks(), 0);
    EXPECT_EQ(dev.h2d_bytes(), 4 * psi + 3 * 4 * n + routing + slots);
    EXPECT_EQ(dev.d2h_bytes(), 4 * psi + routing);
  }
  EXPECT_EQ(gpu_loss, cpu_loss);
  EXPECT_EQ(gpu_grads, cpu_grads);
  EXPECT_GT(model.moe()->stats().forwards, 0);
}

// Mixed precision's rounding counts on a device (kernels/ops round_counted: count_rounding first,
// then the device's round_to / accumulate_to): the same RoundStats and the same 16-bit results
// as kernels/cpu/convert.h counting while it rounds, for accumulation into a NONZERO 16-bit
// buffer (what a second micro-batch does; the stages' walks start from zeros) and for round_to,
// in f16 and bf16, on values from 2^-40 to 2^20 of both signs, with some of 2^-149 and near
// FLT_MAX (so that both formats underflow and overflow).
TEST(DeviceRoundCounts, EqualTheCpuCountsWhileRounding) {
  const int64_t n = 3000;
  std::vector<float> src(n), start(n);
  for (int64_t i = 0; i < n; ++i) {
    const float sign = i % 2 ? -1.0f : 1.0f;
    src[i] = sign * std::ldexp(1.0f + (i % 7) / 8.0f, static_cast<int>(i % 61) - 40);
    if (i % 89 == 0) src[i] = sign * 1e-45f;              // underflows in bf16 too (2^-149)
    if (i % 97 == 1) src[i] = sign * 3.4028e38f;          // overflows in f16 and bf16
    start[i] = i % 5 == 0 ? 0.0f : std::ldexp(1.0f, static_cast<int>(i % 23) - 12);
  }
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  for (DType dt : {DType::kF16, DType::kBF16}) {
    for (bool accumulate : {true, false}) {
      Tensor host = Tensor::empty({n}, dt);
      cpu::round_to(start.data(), host.raw(), dt, n);  // the 16-bit buffer before the call
      Tensor d_src = Tensor::empty({n}, DType::kF32, MemCategory::kOther, Device::kCUDA);
      Tensor d_dst = Tensor::empty({n}, dt, MemCategory::kOther, Device::kCUDA);
      d_src.copy_from(host_copy(src));
      d_dst.copy_from(host);
      cpu::RoundStats want, got;
      if (accumulate) cpu::accumulate_to(src.data(), host.raw(), dt, n, &want);
      else cpu::round_to(src.data(), host.raw(), dt, n, &want);
      round_counted(kernel_ops(Device::kCUDA), d_src.f32(), d_dst.raw(), dt, n, accumulate, &got);
      const std::string what = std::string(to_string(dt)) + (accumulate ? " accumulate" : " round");
      EXPECT_GT(want.underflow, 0) << what;
      EXPECT_GT(want.overflow, 0) << what;
      EXPECT_EQ(got.elements, want.elements) << what;
      EXPECT_EQ(got.nonzero, want.nonzero) << what;
      EXPECT_EQ(got.underflow, want.underflow) << what;
      EXPECT_EQ(got.overflow, want.overflow) << what;
      EXPECT_EQ(got.nonfinite, want.nonfinite) << what;
      Tensor back = Tensor::empty({n}, dt);
      back.copy_from(d_dst);
      EXPECT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0) << what << ": the values";
    }
  }
}

}  // namespace
}  // namespace llmp
