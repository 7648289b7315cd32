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
// under the declaration (its three products between 16-bit inputs on TF32) gives the CPU's out,
// P and dqkv within the same bound. Linked into kernel_table_twin_test; SKIPPED without a GPU,
// with the runtime's reason.
//
// Shapes: N = 37, C = 48, OC = 80 (N not a multiple of a tensor-core tile).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_allocator.h"
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

class MatmulOperandsTwin : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
    cuda::set_tf32(false);
  }
};

/// v rounded to `d` (nearest even), element by element.
Vec values_of(Vec v, DType d = DType::kBF16) {
  for (float& x : v) x = cpu::round_trip(x, d);
  return v;
}
/// n random values in [-1, 1) that are values of `d`.
Vec values_of(DType d, size_t n, unsigned seed) { return values_of(rnd(n, seed), d); }

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

// Attention under the declaration: Q Kᵀ, dY Vᵀ and Pᵀ dY on TF32 (their inputs are 16-bit
// values), P V, dS K and dSᵀ Q in fp32; everything within the fp32 bound of the CPU's.
TEST_F(MatmulOperandsTwin, AttentionWithSixteenBitInputsGivesTheFp32Results) {
  const int B = 2, T = 33, C = 48, H = 4;  // T not a multiple of 32 (as kernels_twin_test's)
  KernelOps& cpu = kernel_ops(Device::kCPU);
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::string dt = to_string(d);
    Vec qkv = values_of(d, B * T * 3 * C, 7), dout = values_of(d, B * T * C, 8);
    for (float& v : qkv) v *= 2.0f;  // [-2, 2): still 16-bit values
    Vec out(B * T * C), att(B * H * T * T), dqkv(qkv.size()), scratch(T * T);
    {
      const MatmulOperands declared(cpu, d);
      cpu.attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
    }
    DevF qkv_d(qkv), out_d(out.size()), att_d(att.size()), dout_d(dout), dqkv_d(qkv.size());
    {
      const MatmulOperands declared(gpu, d);
      gpu.attention_forward(out_d.p, att_d.p, qkv_d.p, B, T, C, H);
    }
    EXPECT_LE(rel_err(out_d.get(), out, (dt + " attention out").c_str()), kGemm);
    EXPECT_LE(rel_err(att_d.get(), att, (dt + " attention P").c_str()), kGemm);
    for (float& p : att) p = cpu::round_trip(p, d);  // the walk keeps P in 16 bits
    DevF att16_d(att);
    {
      const MatmulOperands declared(cpu, d);
      cpu.attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), scratch.data(), B,
                             T, C, H);
    }
    {
      const MatmulOperands declared(gpu, d);
      gpu.attention_backward(dqkv_d.p, dout_d.p, qkv_d.p, att16_d.p, nullptr, B, T, C, H);
    }
    EXPECT_LE(rel_err(dqkv_d.get(), dqkv, (dt + " attention dqkv").c_str()), kGemm);
  }
}

}  // namespace
}  // namespace llmp
