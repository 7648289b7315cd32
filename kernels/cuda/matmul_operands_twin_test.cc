// Mixed precision's products on tensor cores (kernels/ops/kernel_ops.h, MatmulOperands): under a
// bf16 or fp16 declaration the CUDA table's matmul_* entries copy their operands to that 16-bit
// type and multiply the copies on 16-bit tensor cores with fp32 accumulation (context.h
// SixteenBitOperands: cublasGemmEx, CUBLAS_COMPUTE_32F), which is exact for operands that ARE
// bf16/fp16 values. So on such operands the declared products must equal the CPU's fp32 products
// within the fp32 GEMM bound kGemm = 5e-5 (kernels_twin_test's: the same products summed in
// another order), forward, both backward products and the tied head's. The control shows that
// the declaration is what switches the 16-bit copies on: on plain fp32 operands (23-bit
// mantissas) the undeclared product is within kGemm of the CPU's, and the bf16-declared one is
// within kGemm of the CPU's product of the operands ROUNDED to bf16 and beyond kGemm of the exact
// one (a TF32 product would sit ~2⁻¹¹ from the exact one, ~2⁻⁸ from the rounded one). Attention
// under the declaration rounds P and dS as the CPU does and multiplies them on TF32 (the bounds
// at its test); with P stored in 16 bits, every attention product on 16-bit tensor cores
// (AttentionWithSixteenBitStoredProbs). Linked into kernel_table_twin_test; SKIPPED without a
// GPU, with the runtime's reason.
//
// Shapes: N = 37, C = 48, OC = 80 (N not a multiple of a tensor-core tile). Also: the noted
// 16-bit sources the products read instead of copying (NotedSourcesAreWhatTheProductsRead), and
// the linear layers' activations read and written in 16 bits where they are stored so
// (LinearLayersReadAndWriteStoredActivations; its dtype check runs on the host too).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/attention_reference.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/twin_test_util.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

using test::DevF;
using test::rel_err;
using test::rnd;
using test::Vec;
constexpr float kGemm = 5e-5f;
constexpr int N = 37, C = 48, OC = 80;

using MatmulOperandsTwin = test::GpuTwin;

/// v rounded to `d` (nearest even), element by element.
Vec values_of(Vec v, DType d = DType::kBF16) {
  for (float& x : v) x = cpu::round_trip(x, d);
  return v;
}
/// n random values in [-1, 1) that are values of `d`.
Vec values_of(DType d, size_t n, unsigned seed) { return values_of(rnd(n, seed), d); }

/// The v channels [2C, 3C) of each of the `rows` rows of a (rows, 3C) dqkv: dV, (rows, C).
Vec v_channels(const Vec& dqkv, int rows, int C) {
  Vec v(static_cast<size_t>(rows) * C);
  for (int n = 0; n < rows; ++n)
    for (int c = 0; c < C; ++c) v[n * C + c] = dqkv[n * 3 * C + 2 * C + c];
  return v;
}

/// The four products of a linear layer and the tied head on (x, W, dy), by `ops` under the
/// declaration `d`: y = x W, dx = dy Wᵀ, dW = xᵀ dy (from 0), y_nt = x Wᵀ with W read as Wt (OC,C).
struct Products {
  Vec y, dx, dW, y_nt;
};
Products run(KernelOps& ops, DType d, const Vec& x, const Vec& W, const Vec& dy) {
  const MatmulOperands declared(ops, d);
  if (ops.device() == Device::kCUDA) {
    DevF xd(x), Wd(W), dyd(dy), yd(N * OC), dxd(N * C), dWd(Vec(C * OC, 0.0f)), ynt(N * OC);
    ops.matmul_forward(yd.p, xd.p, Wd.p, nullptr, N, C, OC);
    ops.matmul_backward_input(dxd.p, dyd.p, Wd.p, N, C, OC);
    ops.matmul_backward_weight(dWd.p, nullptr, dyd.p, xd.p, N, C, OC);
    ops.matmul_nt_forward(ynt.p, xd.p, Wd.p, N, C, OC);  // W's C·OC floats read as Wt (OC, C)
    return {yd.get(), dxd.get(), dWd.get(), ynt.get()};
  }
  Products h{Vec(N * OC), Vec(N * C), Vec(C * OC, 0.0f), Vec(N * OC)};
  ops.matmul_forward(h.y.data(), x.data(), W.data(), nullptr, N, C, OC);
  ops.matmul_backward_input(h.dx.data(), dy.data(), W.data(), N, C, OC);
  ops.matmul_backward_weight(h.dW.data(), nullptr, dy.data(), x.data(), N, C, OC);
  ops.matmul_nt_forward(h.y_nt.data(), x.data(), W.data(), N, C, OC);
  return h;
}

TEST_F(MatmulOperandsTwin, SixteenBitOperandsOnTensorCoresGiveTheFp32Products) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::string dt = to_string(d);
    const Vec x = values_of(d, N * C, 1), W = values_of(d, C * OC, 2), dy = values_of(d, N * OC, 3);
    // The CPU's products under the same declaration: its check accepts these operands.
    const Products ref = run(kernel_ops(Device::kCPU), d, x, W, dy);
    const Products got = run(kernel_ops(Device::kCUDA), d, x, W, dy);
    EXPECT_LE(rel_err(got.y, ref.y, (dt + " y = x W").c_str()), kGemm);
    EXPECT_LE(rel_err(got.dx, ref.dx, (dt + " dx = dy Wt").c_str()), kGemm);
    EXPECT_LE(rel_err(got.dW, ref.dW, (dt + " dW = xt dy").c_str()), kGemm);
    EXPECT_LE(rel_err(got.y_nt, ref.y_nt, (dt + " y = x Wt (head)").c_str()), kGemm);
  }
  EXPECT_EQ(kernel_ops(Device::kCUDA).matmul_operands(), DType::kF32) << "declaration restored";
}

TEST_F(MatmulOperandsTwin, TheDeclarationIsWhatSwitchesTensorCoresOn) {
  const Vec x = rnd(N * C, 4), W = rnd(C * OC, 5), dy = rnd(N * OC, 6);  // 23-bit mantissas
  const Products ref = run(kernel_ops(Device::kCPU), DType::kF32, x, W, dy);
  const Products plain = run(kernel_ops(Device::kCUDA), DType::kF32, x, W, dy);
  const Products declared = run(kernel_ops(Device::kCUDA), DType::kBF16, x, W, dy);
  // The CPU's fp32 products of the operands rounded to bf16: what the 16-bit copies multiply.
  const Products rounded = run(kernel_ops(Device::kCPU), DType::kBF16, values_of(x),
                               values_of(W), values_of(dy));
  EXPECT_LE(rel_err(plain.y, ref.y, "fp32 operands, undeclared"), kGemm);
  EXPECT_GT(rel_err(declared.y, ref.y, "fp32 operands, declared bf16"), kGemm)
      << "a declared product read its fp32 operands unrounded";
  EXPECT_LE(rel_err(declared.y, rounded.y, "declared bf16 vs the bf16-rounded operands"), kGemm);
  EXPECT_LE(rel_err(declared.dx, rounded.dx, "dx, declared bf16 vs rounded"), kGemm);
  EXPECT_LE(rel_err(declared.dW, rounded.dW, "dW, declared bf16 vs rounded"), kGemm);
  EXPECT_LE(rel_err(declared.y_nt, rounded.y_nt, "head, declared bf16 vs rounded"), kGemm);
}

// Attention under the declaration with P kept in fp32 (att_dtype f32) and probs_dtype = d: the softmax kernels round P and dS to d
// (attention.h, as kernels/cpu/attention.h does), and all six products run on TF32. Two fp32
// computations of one P may round to neighbouring 16-bit values, so P is checked to one 16-bit
// step of the CPU's, and out against the product of the GPU's OWN P with V (kGemm); dV = Pᵀ dY
// (same att and dY on both sides, no dS) to kGemm; dQ and dK, which read the rounded dS, to a
// 16-bit bound kRound.
TEST_F(MatmulOperandsTwin, AttentionWithSixteenBitInputsGivesTheFp32Results) {
  const int B = 2, T = 33, C = 48, H = 4;  // T not a multiple of 32
  KernelOps& cpu = kernel_ops(Device::kCPU);
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::string dt = to_string(d);
    const float step = d == DType::kBF16 ? 1.0f / 128 : 1.0f / 1024;  // 2^-mantissa bits
    const float tiny = d == DType::kF16 ? 0x1p-24f : 0.0f;  // fp16's subnormal step
    const float kRound = d == DType::kBF16 ? 1e-2f : 2e-3f;
    Vec qkv = values_of(d, B * T * 3 * C, 7), dout = values_of(d, B * T * C, 8);
    for (float& v : qkv) v *= 2.0f;  // [-2, 2): still 16-bit values
    Vec out(B * T * C), att(B * H * T * T), dqkv(qkv.size()), scratch(T * T);
    {
      const MatmulOperands declared(cpu, d);
      cpu.attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H, d);
    }
    DevF qkv_d(qkv), out_d(out.size()), att_d(att.size()), dout_d(dout), dqkv_d(qkv.size());
    {
      const MatmulOperands declared(gpu, d);
      gpu.attention_forward(out_d.p, att_d.p, qkv_d.p, B, T, C, H, d);
    }
    const Vec P = att_d.get(), y = out_d.get();
    EXPECT_EQ(cpu::first_inexact(P.data(), static_cast<int64_t>(P.size()), d), -1)
        << dt << ": the softmax did not round P";
    int far = 0;
    for (size_t i = 0; i < P.size(); ++i) far += std::fabs(P[i] - att[i]) > step * att[i] + tiny;
    EXPECT_EQ(far, 0) << dt << ": P elements more than one 16-bit step from the CPU's";
    const std::vector<double> pv = testing::attention_pv_reference(P.data(), qkv.data(), B, T, C,
                                                                   H);  // the GPU's own P
    const Vec y_ref(pv.begin(), pv.end());
    EXPECT_LE(rel_err(y, y_ref, (dt + " out = P V with the GPU's P").c_str()), kGemm);
    DevF att16_d(att);  // the CPU's P (16-bit values) for both backwards
    {
      const MatmulOperands declared(cpu, d);
      cpu.attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), scratch.data(), B,
                             T, C, H, d);
    }
    {
      const MatmulOperands declared(gpu, d);
      gpu.attention_backward(dqkv_d.p, dout_d.p, qkv_d.p, att16_d.p, nullptr, B, T, C, H, d);
    }
    const Vec g = dqkv_d.get();
    const Vec dv = v_channels(g, B * T, C), dv_ref = v_channels(dqkv, B * T, C);
    EXPECT_LE(rel_err(dv, dv_ref, (dt + " dV = Pt dY").c_str()), kGemm);
    EXPECT_LE(rel_err(g, dqkv, (dt + " dqkv, dS rounded on both sides").c_str()), kRound);
  }
}

// P stored in 16 bits (att_dtype = d: the model's case, attention.h): the softmax writes P in d
// itself and the products read 16-bit operands on 16-bit tensor cores. Against the CPU table on
// the same 16-bit att (it computes through an fp32 copy, kernel_ops.h Fp32Copy), with probs_dtype
// as the model passes it (sublayer.h rounded_products: bf16 rounds, fp16 does not):
//   - the stored P within one 16-bit step of the CPU's;
//   - out: bf16, against the GPU's own stored P times V (kGemm); fp16, whose P V reads the fp32 P,
//     against the CPU's out (kGemm);
//   - given the CPU's P: dV = Pᵀ dY to kGemm, dqkv to kRound;
//   - bf16, the sources: qkv's fp32 copy noted with -qkv's 16-bit bits must give -out
//     (S = (-Q)(-K)ᵀ is S, V is negated), so the products read the source, not the copy.
//     Forgotten, out again.
TEST_F(MatmulOperandsTwin, AttentionWithSixteenBitStoredProbs) {
  const int B = 2, T = 33, C = 48, H = 4;
  KernelOps& cpu = kernel_ops(Device::kCPU);
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::string dt = to_string(d);
    const DType probs = d == DType::kBF16 ? d : DType::kF32;
    const float step = d == DType::kBF16 ? 1.0f / 128 : 1.0f / 1024;  // 2^-mantissa bits
    const float tiny = d == DType::kF16 ? 0x1p-24f : 0.0f;  // fp16's subnormal step
    const float kRound = d == DType::kBF16 ? 1e-2f : 2e-3f;
    Vec qkv = values_of(d, B * T * 3 * C, 17);
    for (float& v : qkv) v *= 2.0f;
    const Vec dout = values_of(d, B * T * C, 18);
    const int64_t np = int64_t{B} * H * T * T;
    std::vector<uint16_t> att(np);
    Vec out(B * T * C), dqkv(qkv.size()), scratch(T * T), P(np), P_ref(np);
    auto forward = [&](KernelOps& ops, float* y, void* a, const float* q) {
      const MatmulOperands declared(ops, d);
      ops.attention_forward(y, Act(a, d), q, B, T, C, H, probs);
    };
    forward(cpu, out.data(), att.data(), qkv.data());
    DevF qkv_d(qkv), out_d(out.size()), dout_d(dout), dqkv_d(qkv.size());
    test::Dev<uint16_t> att_d(static_cast<size_t>(np)), att16_d(att);
    forward(gpu, out_d.p, att_d.p, qkv_d.p);
    const Vec y = out_d.get();
    cpu::widen(att_d.get().data(), d, P.data(), np);
    cpu::widen(att.data(), d, P_ref.data(), np);
    int far = 0;
    for (int64_t i = 0; i < np; ++i) far += std::fabs(P[i] - P_ref[i]) > step * P_ref[i] + tiny;
    EXPECT_EQ(far, 0) << dt << ": stored P elements more than one 16-bit step from the CPU's";
    if (d == DType::kBF16) {
      const std::vector<double> pv = testing::attention_pv_reference(P.data(), qkv.data(), B, T,
                                                                     C, H);
      EXPECT_LE(rel_err(y, Vec(pv.begin(), pv.end()), "bf16 out = stored P V"), kGemm);
    } else {
      EXPECT_LE(rel_err(y, out, "f16 out (fp32 P)"), kGemm);
    }
    {
      const MatmulOperands declared(cpu, d);
      cpu.attention_backward(dqkv.data(), dout.data(), qkv.data(), ActIn(att.data(), d),
                             scratch.data(), B, T, C, H, probs);
    }
    {
      const MatmulOperands declared(gpu, d);
      gpu.attention_backward(dqkv_d.p, dout_d.p, qkv_d.p, ActIn(att16_d.p, d), nullptr, B, T, C, H,
                             probs);
    }
    const Vec g = dqkv_d.get();
    const Vec dv = v_channels(g, B * T, C), dv_ref = v_channels(dqkv, B * T, C);
    EXPECT_LE(rel_err(dv, dv_ref, (dt + " dV = Pt dY, stored P").c_str()), kGemm);
    EXPECT_LE(rel_err(g, dqkv, (dt + " dqkv, stored P").c_str()), kRound);
    // The sources: -qkv's bits noted for qkv's copy (bf16: fp16's P V reads V's fp32 copy).
    if (d != DType::kBF16) continue;
    Vec neg = qkv;
    for (float& v : neg) v = -v;
    std::vector<uint16_t> neg16(neg.size());
    cpu::round_to(neg.data(), neg16.data(), d, static_cast<int64_t>(neg.size()));
    test::Dev<uint16_t> neg16_d(neg16);
    gpu.note_source(qkv_d.p, neg16_d.p, d, static_cast<int64_t>(qkv.size()));
    forward(gpu, out_d.p, att_d.p, qkv_d.p);
    gpu.forget_source(qkv_d.p);
    Vec y_neg = out_d.get();
    for (float& v : y_neg) v = -v;
    EXPECT_LE(rel_err(y_neg, y, (dt + " qkv noted with -qkv's source: -out").c_str()), kGemm);
    forward(gpu, out_d.p, att_d.p, qkv_d.p);
    EXPECT_LE(rel_err(out_d.get(), y, (dt + " forgotten: out again").c_str()), kGemm);
  }
}

// Noted widenings (KernelOps::note_source, sixteen_bit_sources.h): a declared product reads an
// operand inside one from its 16-bit source. With the true sources the products are the CPU's
// (kGemm); the control notes x's copy with ANOTHER 16-bit buffer (-x): the product must then be
// -y, which shows the source, not the fp32 copy, is what was read. Forgotten, y again.
TEST_F(MatmulOperandsTwin, NotedSourcesAreWhatTheProductsRead) {
  const DType d = DType::kBF16;
  const Vec x = values_of(d, N * C, 11), W = values_of(d, C * OC, 12);
  Vec neg = x;
  for (float& v : neg) v = -v;
  std::vector<uint16_t> x16(x.size()), neg16(x.size()), W16(W.size());
  cpu::round_to(x.data(), x16.data(), d, static_cast<int64_t>(x.size()));
  cpu::round_to(neg.data(), neg16.data(), d, static_cast<int64_t>(neg.size()));
  cpu::round_to(W.data(), W16.data(), d, static_cast<int64_t>(W.size()));
  Vec ref(N * OC);
  kernel_ops(Device::kCPU).matmul_forward(ref.data(), x.data(), W.data(), nullptr, N, C, OC);
  Vec ref_neg = ref;
  for (float& v : ref_neg) v = -v;
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  test::Dev<uint16_t> x16d(x16), neg16d(neg16), W16d(W16);
  DevF xd(x), Wd(W), y(N * OC);
  auto product = [&](const void* x_source) {
    gpu.note_source(xd.p, x_source, d, N * C);
    gpu.note_source(Wd.p, W16d.p, d, C * OC);
    {
      const MatmulOperands declared(gpu, d);
      gpu.matmul_forward(y.p, xd.p, Wd.p, nullptr, N, C, OC);
    }
    gpu.forget_source(xd.p);
    gpu.forget_source(Wd.p);
    return y.get();
  };
  EXPECT_LE(rel_err(product(x16d.p), ref, "x and W read from their sources"), kGemm);
  EXPECT_LE(rel_err(product(neg16d.p), ref_neg, "x's copy noted with -x's source"), kGemm);
  {
    const MatmulOperands declared(gpu, d);
    gpu.matmul_forward(y.p, xd.p, Wd.p, nullptr, N, C, OC);
  }
  EXPECT_LE(rel_err(y.get(), ref, "forgotten: the copies again"), kGemm);
}

// The linear layers' activations as stored (kernel_ops.h Act, matmul.h's stored overloads): 16-bit
// x, y, dy, dx of the declared dtype are cuBLAS's operands and results as they are (bf16 and fp16
// declared), and any other 16-bit one goes through an fp32 copy (fp16 undeclared). Against the
// CPU table on the same 16-bit buffers (fp32 products rounded once): y and dx within one 16-bit
// step (two fp32 sums of one product may round to neighbours), dW and db within kGemm.
TEST_F(MatmulOperandsTwin, LinearLayersReadAndWriteStoredActivations) {
  KernelOps& cpu = kernel_ops(Device::kCPU);
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  using H16 = std::vector<uint16_t>;
  for (const auto& [d, declare] : {std::make_pair(DType::kBF16, DType::kBF16),
                                   std::make_pair(DType::kF16, DType::kF16),
                                   std::make_pair(DType::kF16, DType::kF32)}) {
    const std::string dt = std::string(to_string(d)) + " declared " + to_string(declare);
    const float step = (d == DType::kBF16 ? 1.0f / 128 : 1.0f / 1024) + kGemm;
    const Vec x = values_of(d, N * C, 21), W = values_of(d, C * OC, 22);
    const Vec b = values_of(d, OC, 23), dy = values_of(d, N * OC, 24);
    H16 x16(x.size()), dy16(dy.size()), y16(N * OC), dx16(N * C);
    cpu::round_to(x.data(), x16.data(), d, static_cast<int64_t>(x.size()));
    cpu::round_to(dy.data(), dy16.data(), d, static_cast<int64_t>(dy.size()));
    Vec dW(C * OC, 0.5f), db(OC, 0.5f), y(N * OC), dx(N * C);
    {
      const MatmulOperands declared(cpu, declare);
      cpu.matmul_forward(Act(y16.data(), d), ActIn(x16.data(), d), W.data(), b.data(), N, C, OC);
      cpu.matmul_backward_input(Act(dx16.data(), d), ActIn(dy16.data(), d), W.data(), N, C, OC);
      cpu.matmul_backward_weight(dW.data(), db.data(), ActIn(dy16.data(), d),
                                 ActIn(x16.data(), d), N, C, OC);
    }
    test::Dev<uint16_t> x16d(x16), dy16d(dy16), y16d(y16.size()), dx16d(dx16.size());
    DevF Wd(W), bd(b), dWd(Vec(C * OC, 0.5f)), dbd(Vec(OC, 0.5f));
    {
      const MatmulOperands declared(gpu, declare);
      gpu.matmul_forward(Act(y16d.p, d), ActIn(x16d.p, d), Wd.p, bd.p, N, C, OC);
      gpu.matmul_backward_input(Act(dx16d.p, d), ActIn(dy16d.p, d), Wd.p, N, C, OC);
      gpu.matmul_backward_weight(dWd.p, dbd.p, ActIn(dy16d.p, d), ActIn(x16d.p, d), N, C, OC);
    }
    Vec y_ref(y16.size()), dx_ref(dx16.size());
    cpu::widen(y16.data(), d, y_ref.data(), static_cast<int64_t>(y_ref.size()));
    cpu::widen(dx16.data(), d, dx_ref.data(), static_cast<int64_t>(dx_ref.size()));
    cpu::widen(y16d.get().data(), d, y.data(), static_cast<int64_t>(y.size()));
    cpu::widen(dx16d.get().data(), d, dx.data(), static_cast<int64_t>(dx.size()));
    EXPECT_LE(rel_err(y, y_ref, (dt + ": 16-bit y = x W + b").c_str()), step);
    EXPECT_LE(rel_err(dx, dx_ref, (dt + ": 16-bit dx = dy Wt").c_str()), step);
    EXPECT_LE(rel_err(dWd.get(), dW, (dt + ": dW += xt dy").c_str()), kGemm);
    EXPECT_LE(rel_err(dbd.get(), db, (dt + ": db += sum dy").c_str()), kGemm);
  }
}

// matmul.h's stored overloads refuse, by name and before any device work (so this runs without a
// GPU), a 16-bit activation of another dtype than the declared one, and a dtype none of f32, f16,
// bf16. (The CUDA table never hands them one: it copies such activations to fp32 first.)
TEST(MatmulOperandsHost, StoredActivationsOfAnotherDtypeAreRefusedByName) {
  const cuda::SixteenBitOperands bf16(CUDA_R_16BF);
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("nothing thrown");
  };
  const std::string m = message([] {
    cuda::matmul_forward(nullptr, DType::kF16, nullptr, DType::kBF16, nullptr, nullptr, N, C, OC);
  });
  EXPECT_NE(m.find("matmul_forward: y is f16, yet the products were declared bf16"),
            std::string::npos) << m;
  const std::string w = message([] {
    cuda::matmul_backward_weight(nullptr, nullptr, nullptr, DType::kBF16, nullptr, DType::kF64, N,
                                 C, OC);
  });
  EXPECT_NE(w.find("matmul_backward_weight: x is f64, none of f32, f16, bf16"), std::string::npos)
      << w;
}

}  // namespace
}  // namespace llmp
