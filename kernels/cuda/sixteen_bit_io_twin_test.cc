// The CUDA table's forwards that read and write 16-bit activations themselves (kernel_ops.h Act:
// LayerNorm, GELU, the residual add; attention's in AttentionActivationsAsStored), and the
// backwards that read them (BackwardsRead...), against the CPU table on the same 16-bit buffers
// (which computes through fp32 copies, kernels/ops:stored_activations_test). Both compute in fp32
// and round once, so they differ only where the fp32 results differ (LayerNorm's row sums in
// another order; libdevice's tanhf against the CPU's, kernels_twin_test's 2e-6) and a rounding
// boundary lies between them: each 16-bit result must be within one 16-bit step of the CPU's
// (|g - c| ≤ 2⁻⁷·|c| for bf16, 2⁻¹⁰·|c| + 2⁻²⁴ for fp16, or equal; the first version of this
// test had 2⁻⁸ and 2⁻¹¹, half a step above a power of two, and was never run: caught on reading
// it again, before any GPU ran it). The residual sum is x + y + b in the same order
// on both: bit for bit. The mean and rstd are fp32 (1e-6). Then a mixed call (an f32 output of a
// 16-bit input) goes through fp32 copies and must equal the CPU's too. Linked into
// kernel_table_twin_test; SKIPPED without a GPU, with the runtime's reason.
//
// Shapes: N = 37 rows of C = 100 channels (> 32 and not a multiple of a warp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/twin_test_util.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

using test::Dev;
using test::DevF;
using test::rnd;
using test::Vec;
using H16 = std::vector<uint16_t>;
constexpr int N = 37, C = 100;

using SixteenBitIoTwin = test::GpuTwin;

H16 to16(const Vec& v, DType d) {
  H16 h(v.size());
  cpu::round_to(v.data(), h.data(), d, static_cast<int64_t>(v.size()));
  return h;
}

Vec widened(const H16& h, DType d) {
  Vec v(h.size());
  cpu::widen(h.data(), d, v.data(), static_cast<int64_t>(h.size()));
  return v;
}

/// How many elements of got are more than one 16-bit step from ref: a step of c is at most
/// 2⁻⁷·|c| in bf16 (7 mantissa bits; 2⁻⁸·|c| below a power of two, 2⁻⁷·|c| above one) and
/// 2⁻¹⁰·|c| in fp16, whose subnormals below 2⁻¹⁴ step by 2⁻²⁴.
int64_t beyond_one_step(const H16& got, const H16& ref, DType d) {
  const float step = d == DType::kBF16 ? 1.0f / 128 : 1.0f / 1024;
  const float tiny = d == DType::kF16 ? 0x1p-24f : 0.0f;
  const Vec g = widened(got, d), r = widened(ref, d);
  int64_t n = 0;
  for (size_t i = 0; i < g.size(); ++i)
    n += std::fabs(g[i] - r[i]) > step * std::fabs(r[i]) + tiny;
  return n;
}

TEST_F(SixteenBitIoTwin, ForwardsReadAndWriteSixteenBits) {
  KernelOps& cpu = kernel_ops(Device::kCPU);
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  const Vec w = rnd(C, 1), b = rnd(C, 2);
  DevF w_d(w), b_d(b), m_d(N), r_d(N);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::string dt = to_string(d);
    const H16 x = to16(rnd(N * C, 3, -3.0f, 3.0f), d), y = to16(rnd(N * C, 4, -3.0f, 3.0f), d);
    Dev<uint16_t> x_d(x), y_d(y), out_d(static_cast<size_t>(N * C));
    H16 ref(N * C);
    Vec mean(N), rstd(N);
    cpu.layernorm_forward(Act(ref.data(), d), mean.data(), rstd.data(), ActIn(x.data(), d),
                          w.data(), b.data(), N, C);
    gpu.layernorm_forward(Act(out_d.p, d), m_d.p, r_d.p, ActIn(x_d.p, d), w_d.p, b_d.p, N, C);
    EXPECT_EQ(beyond_one_step(out_d.get(), ref, d), 0) << dt << ": layernorm y";
    EXPECT_LE(test::rel_err(m_d.get(), mean, "mean"), 1e-6f);
    EXPECT_LE(test::rel_err(r_d.get(), rstd, "rstd"), 1e-6f);
    cpu.gelu_forward(Act(ref.data(), d), ActIn(x.data(), d), N * C);
    gpu.gelu_forward(Act(out_d.p, d), ActIn(x_d.p, d), N * C);
    EXPECT_EQ(beyond_one_step(out_d.get(), ref, d), 0) << dt << ": gelu";
    cpu.residual_bias_add(Act(ref.data(), d), ActIn(x.data(), d), ActIn(y.data(), d), b.data(), N,
                          C);
    gpu.residual_bias_add(Act(y_d.p, d), ActIn(x_d.p, d), ActIn(y_d.p, d), b_d.p, N, C);  // in y
    EXPECT_EQ(y_d.get(), ref) << dt << ": residual, in place";
    // A mixed call: an f32 output of the 16-bit x, through fp32 copies.
    Vec ref32(N * C);
    DevF out32_d(static_cast<size_t>(N * C));
    cpu.gelu_forward(ref32.data(), ActIn(x.data(), d), N * C);
    gpu.gelu_forward(out32_d.p, ActIn(x_d.p, d), N * C);
    EXPECT_LE(test::rel_err(out32_d.get(), ref32, (dt + " gelu, f32 out").c_str()), 2e-6f);
  }
}

// The backwards reading 16-bit dy and x (fp32 outputs): within kernels_twin_test's bounds of the
// CPU table's (row reductions and column sums 1e-5, GELU's element map 2e-6).
TEST_F(SixteenBitIoTwin, BackwardsReadSixteenBitInputs) {
  KernelOps& cpu = kernel_ops(Device::kCPU);
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  const Vec w = rnd(C, 11), b = rnd(C, 12);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::string dt = to_string(d);
    const H16 x = to16(rnd(N * C, 13, -3.0f, 3.0f), d), dy = to16(rnd(N * C, 14), d);
    Vec mean(N), rstd(N), y(N * C);
    cpu.layernorm_forward(y.data(), mean.data(), rstd.data(), ActIn(x.data(), d), w.data(),
                          b.data(), N, C);
    Vec dx = rnd(N * C, 15), dw = rnd(C, 16), db = rnd(C, 17), g = rnd(N * C, 18);
    DevF dx_d(dx), dw_d(dw), db_d(db), w_d(w), m_d(mean), r_d(rstd), g_d(N * C), db2_d(db);
    Dev<uint16_t> x_d(x), dy_d(dy);
    cpu.layernorm_backward(dx.data(), dx.data(), dw.data(), db.data(), ActIn(dy.data(), d),
                           ActIn(x.data(), d), w.data(), mean.data(), rstd.data(), N, C);
    gpu.layernorm_backward(dx_d.p, dx_d.p, dw_d.p, db_d.p, ActIn(dy_d.p, d), ActIn(x_d.p, d), w_d.p,
                           m_d.p, r_d.p, N, C);
    EXPECT_LE(test::rel_err(dx_d.get(), dx, (dt + " layernorm dx").c_str()), 1e-5f);
    EXPECT_LE(test::rel_err(dw_d.get(), dw, (dt + " layernorm dw").c_str()), 1e-5f);
    EXPECT_LE(test::rel_err(db_d.get(), db, (dt + " layernorm db").c_str()), 1e-5f);
    // dx as stored = dres + LNᵀ(dy), rounded once: within one 16-bit step of the CPU's.
    const H16 dres = to16(rnd(N * C, 19), d);
    H16 dx16(N * C);
    Dev<uint16_t> dres_d(dres), dx16_d(static_cast<size_t>(N * C));
    cpu.layernorm_backward(Act(dx16.data(), d), ActIn(dres.data(), d), nullptr, nullptr,
                           ActIn(dy.data(), d), ActIn(x.data(), d), w.data(), mean.data(),
                           rstd.data(), N, C);
    gpu.layernorm_backward(Act(dx16_d.p, d), ActIn(dres_d.p, d), nullptr, nullptr,
                           ActIn(dy_d.p, d), ActIn(x_d.p, d), w_d.p, m_d.p, r_d.p, N, C);
    EXPECT_EQ(beyond_one_step(dx16_d.get(), dx16, d), 0) << dt << ": layernorm 16-bit dx";
    const Vec dyf = widened(dy, d);
    DevF dyf_d(dyf);
    cpu.gelu_backward(g.data(), ActIn(x.data(), d), dyf.data(), N * C);
    gpu.gelu_backward(g_d.p, ActIn(x_d.p, d), dyf_d.p, N * C);
    EXPECT_LE(test::rel_err(g_d.get(), g, (dt + " gelu_backward").c_str()), 2e-6f);
    H16 g16(N * C);  // dx as stored: rounded once, within one 16-bit step of the CPU's
    Dev<uint16_t> g16_d(static_cast<size_t>(N * C));
    cpu.gelu_backward(Act(g16.data(), d), ActIn(x.data(), d), dyf.data(), N * C);
    gpu.gelu_backward(Act(g16_d.p, d), ActIn(x_d.p, d), dyf_d.p, N * C);
    EXPECT_EQ(beyond_one_step(g16_d.get(), g16, d), 0) << dt << ": gelu_backward, 16-bit dx";
    Vec db2 = rnd(C, 17);
    cpu.residual_bias_backward(db2.data(), ActIn(dy.data(), d), N, C);
    gpu.residual_bias_backward(db2_d.p, ActIn(dy_d.p, d), N, C);
    EXPECT_LE(test::rel_err(db2_d.get(), db2, (dt + " bias backward").c_str()), 1e-5f);
  }
}

// Attention with out, qkv, dout and dqkv as stored (the walk's bf16 call: P and dS rounded to
// bf16, every product on 16-bit tensor cores reading and writing the 16 bits; fp16 with fp32
// P and dS: through fp32 copies), against the CPU table on the same buffers. P within one 16-bit
// step; out and dqkv, whose 16-bit values also carry the neighbouring P and dS of the two sides,
// within kRound of the largest (matmul_operands_twin_test's dqkv bound plus a 16-bit step).
TEST_F(SixteenBitIoTwin, AttentionActivationsAsStored) {
  const int B = 2, T = 33, Ca = 48, H = 4;
  const int64_t np = int64_t{B} * H * T * T, nq = int64_t{B} * T * 3 * Ca, no = int64_t{B} * T * Ca;
  KernelOps& cpu = kernel_ops(Device::kCPU);
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::string dt = to_string(d);
    const DType probs = d == DType::kBF16 ? d : DType::kF32;  // sublayer.h rounded_products
    const float kRound = d == DType::kBF16 ? 2e-2f : 3e-3f;
    const H16 qkv = to16(rnd(nq, 21, -2.0f, 2.0f), d), dout = to16(rnd(no, 22), d);
    H16 out(no), att(np), dqkv(nq);
    std::vector<float> scratch(T * T);
    Dev<uint16_t> qkv_d(qkv), dout_d(dout), out_d(static_cast<size_t>(no));
    Dev<uint16_t> att_d(static_cast<size_t>(np)), dqkv_d(static_cast<size_t>(nq));
    {
      const MatmulOperands declared(cpu, d);
      cpu.attention_forward(Act(out.data(), d), Act(att.data(), d), ActIn(qkv.data(), d), B, T,
                            Ca, H, probs);
      cpu.attention_backward(Act(dqkv.data(), d), ActIn(dout.data(), d), ActIn(qkv.data(), d),
                             ActIn(att.data(), d), scratch.data(), B, T, Ca, H, probs);
    }
    const Dev<uint16_t> att_cpu_d(att);  // the GPU's backward on the CPU's P: dqkv then differs
    {                                    // only by the products' order and roundings
      const MatmulOperands declared(gpu, d);
      gpu.attention_forward(Act(out_d.p, d), Act(att_d.p, d), ActIn(qkv_d.p, d), B, T, Ca, H,
                            probs);
      gpu.attention_backward(Act(dqkv_d.p, d), ActIn(dout_d.p, d), ActIn(qkv_d.p, d),
                             ActIn(att_cpu_d.p, d), nullptr, B, T, Ca, H, probs);
    }
    EXPECT_EQ(beyond_one_step(att_d.get(), att, d), 0) << dt << ": the stored P";
    EXPECT_LE(test::rel_err(widened(out_d.get(), d), widened(out, d), (dt + " out").c_str()),
              kRound);
    EXPECT_LE(test::rel_err(widened(dqkv_d.get(), d), widened(dqkv, d), (dt + " dqkv").c_str()),
              kRound);
  }
}

// Which calls take attention's activations as they are (attention.h attention_takes_stored):
// all fp32, or P in a 16-bit dtype that is also probs_dtype (bf16's walk) with every activation
// fp32 or of that dtype. fp16's walk (P stored in fp16, P and dS unrounded) is not: its P V,
// dS K and dSᵀ Q read fp32 operands, so the table copies its activations to fp32. The overloads
// refuse what it does not take, by name, before any device work (this runs without a GPU); so
// do gelu_backward and layernorm_backward a dx of another 16-bit dtype than their inputs'.
TEST(SixteenBitIoHost, StoredActivationsOfOtherDtypesAreRefusedBeforeDeviceWork) {
  const DType f32 = DType::kF32, bf16 = DType::kBF16, f16 = DType::kF16;
  EXPECT_TRUE(cuda::attention_takes_stored(f32, f32, {f32, f32}));
  EXPECT_TRUE(cuda::attention_takes_stored(bf16, bf16, {bf16, bf16, bf16}));
  EXPECT_TRUE(cuda::attention_takes_stored(bf16, bf16, {f32, bf16}));
  EXPECT_TRUE(cuda::attention_takes_stored(f16, f16, {f16}));
  EXPECT_TRUE(cuda::attention_takes_stored(f16, f32, {f32, f32}));  // all fp32: the old path
  EXPECT_FALSE(cuda::attention_takes_stored(f16, f32, {f16, f16})) << "fp16's walk";
  EXPECT_FALSE(cuda::attention_takes_stored(f32, f32, {bf16})) << "P in fp32";
  EXPECT_FALSE(cuda::attention_takes_stored(bf16, bf16, {f16})) << "another 16-bit dtype";
  try {
    cuda::attention_forward(nullptr, f16, nullptr, f16, nullptr, f16, 2, 3, 4, 2, true, f32);
    FAIL() << "fp16 activations with fp32 probabilities were taken as stored";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda::attention_forward: activations of dtypes f16, f16"),
              std::string::npos)
        << e.what();
  }
  // gelu_backward's and layernorm_backward's dx: f32 or the inputs' dtype, nothing else (the
  // table copies other ones to fp32).
  EXPECT_THROW(cuda::gelu_backward(nullptr, nullptr, nullptr, 8, bf16, f16), std::invalid_argument);
  EXPECT_THROW(cuda::layernorm_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                        nullptr, nullptr, 2, 4, bf16, f16),
               std::invalid_argument);
}

}  // namespace
}  // namespace llmp
