// The CPU table's entries that take activations as stored (kernel_ops.h Act: attention's P, the
// LayerNorm, GELU and residual forwards, the inputs of their backwards, the linear layers' x, y,
// dy and dx) on 16-bit ones: they compute through fp32 copies (Fp32Copy), so they must give, bit
// for bit, what the model got when it wrapped these calls in common/nn's F32Out and F32In: the
// fp32 kernel's results on the inputs widened, rounded once into the 16-bit outputs. Also: the
// bias checked under a 16-bit declaration, an f32 Act is the buffer itself, a copy is counted as
// conversion scratch while it lives, the in-place residual add, and a bad dtype refused by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/tensor/memory.h"
#include "common/tensor/tensor.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/residual.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

constexpr int B = 2, T = 9, C = 12, H = 3;
constexpr int64_t kProbs = int64_t{B} * H * T * T;

std::vector<float> values(size_t n, unsigned seed, DType d) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = cpu::round_trip(u(g), d);  // activations of a 16-bit walk
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// An fp32 copy of v as the table makes one (Tensor::empty: Eigen's products may sum in another
// order on a buffer aligned otherwise).
Tensor f32_tensor(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::kF32, MemCategory::kOther);
  std::memcpy(t.f32(), v.data(), v.size() * sizeof(float));
  return t;
}

std::vector<float> to_vector(const Tensor& t) {
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

std::vector<uint16_t> rounded(const std::vector<float>& v, DType d) {
  std::vector<uint16_t> h(v.size());
  cpu::round_to(v.data(), h.data(), d, static_cast<int64_t>(v.size()));
  return h;
}

TEST(StoredActivations, SixteenBitAttIsTheFp32KernelRounded) {
  KernelOps& ops = kernel_ops(Device::kCPU);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const DType probs = d == DType::kBF16 ? d : DType::kF32;  // sublayer.h rounded_products
    const std::vector<float> qkv = values(B * T * 3 * C, 1, d), dout = values(B * T * C, 2, d);
    std::vector<float> out_ref(B * T * C), out(B * T * C), scratch(T * T);
    // P in a Tensor as F32Out made it: Eigen's products may sum in another order on a buffer
    // aligned otherwise (a std::vector's), which is not what this test is about.
    Tensor att32 = Tensor::empty({kProbs}, DType::kF32, MemCategory::kOther);
    cpu::attention_forward(out_ref.data(), att32.f32(), qkv.data(), B, T, C, H, probs);
    std::vector<uint16_t> att16(kProbs), att16_ref(kProbs);
    cpu::round_to(att32.f32(), att16_ref.data(), d, kProbs);
    ops.attention_forward(out.data(), Act(att16.data(), d), qkv.data(), B, T, C, H, probs);
    EXPECT_TRUE(same_bits(out, out_ref)) << to_string(d) << ": out";
    EXPECT_EQ(att16, att16_ref) << to_string(d) << ": the stored P";
    std::vector<uint16_t> probs16(kProbs);
    ops.attention_probs(Act(probs16.data(), d), qkv.data(), B, T, C, H, probs);
    EXPECT_EQ(probs16, att16) << to_string(d) << ": recomputation's P";
    std::vector<float> dqkv_ref(qkv.size()), dqkv(qkv.size());
    Tensor P = Tensor::empty({kProbs}, DType::kF32, MemCategory::kOther);  // as F32In made it
    cpu::widen(att16.data(), d, P.f32(), kProbs);
    cpu::attention_backward(dqkv_ref.data(), dout.data(), qkv.data(), P.f32(), scratch.data(), B,
                            T, C, H, probs);
    ops.attention_backward(dqkv.data(), dout.data(), qkv.data(), ActIn(att16.data(), d),
                           scratch.data(), B, T, C, H, probs);
    EXPECT_TRUE(same_bits(dqkv, dqkv_ref)) << to_string(d) << ": dqkv";
  }
}


// Attention with every activation as stored (out, qkv, dout, dqkv in 16 bits, as the model's
// walk hands them): the fp32 kernels on the widened values, each output rounded once.
TEST(StoredActivations, AttentionActivationsAsStoredAreTheFp32KernelsRounded) {
  KernelOps& ops = kernel_ops(Device::kCPU);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const DType probs = d == DType::kBF16 ? d : DType::kF32;  // sublayer.h rounded_products
    const std::vector<float> qkv = values(B * T * 3 * C, 19, d), dout = values(B * T * C, 20, d);
    Tensor q = f32_tensor(qkv), dy = f32_tensor(dout);
    Tensor out = Tensor::empty({B * T * C}, DType::kF32, MemCategory::kOther);
    Tensor att = Tensor::empty({kProbs}, DType::kF32, MemCategory::kOther);
    cpu::attention_forward(out.f32(), att.f32(), q.f32(), B, T, C, H, probs);
    const std::vector<uint16_t> qkv16 = rounded(qkv, d), dout16 = rounded(dout, d);
    const std::vector<uint16_t> att16_ref = rounded(to_vector(att), d);
    std::vector<uint16_t> out16(B * T * C), att16(kProbs), probs16(kProbs), dqkv16(qkv.size());
    ops.attention_forward(Act(out16.data(), d), Act(att16.data(), d), ActIn(qkv16.data(), d), B,
                          T, C, H, probs);
    EXPECT_EQ(out16, rounded(to_vector(out), d)) << to_string(d) << ": out";
    EXPECT_EQ(att16, att16_ref) << to_string(d) << ": the stored P";
    ops.attention_probs(Act(probs16.data(), d), ActIn(qkv16.data(), d), B, T, C, H, probs);
    EXPECT_EQ(probs16, att16) << to_string(d) << ": recomputation's P";
    Tensor P = Tensor::empty({kProbs}, DType::kF32, MemCategory::kOther);
    cpu::widen(att16.data(), d, P.f32(), kProbs);
    Tensor dqkv = Tensor::empty({B * T * 3 * C}, DType::kF32, MemCategory::kOther);
    std::vector<float> scratch(T * T);
    cpu::attention_backward(dqkv.f32(), dy.f32(), q.f32(), P.f32(), scratch.data(), B, T, C, H,
                            probs);
    ops.attention_backward(Act(dqkv16.data(), d), ActIn(dout16.data(), d),
                           ActIn(qkv16.data(), d), ActIn(att16.data(), d), scratch.data(), B, T,
                           C, H, probs);
    EXPECT_EQ(dqkv16, rounded(to_vector(dqkv), d)) << to_string(d) << ": dqkv";
  }
}

// The forwards of LayerNorm, GELU and the residual add (in place in y, as the walk calls it, and
// into another buffer) on 16-bit x, y: the fp32 kernels on the widened values, rounded once.
TEST(StoredActivations, ElementwiseForwardsAreTheFp32KernelsRounded) {
  KernelOps& ops = kernel_ops(Device::kCPU);
  constexpr int N = 7, Ch = 40;
  const std::vector<float> w = values(Ch, 3, DType::kF32), b = values(Ch, 4, DType::kF32);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::vector<float> x = values(N * Ch, 5, d), y = values(N * Ch, 6, d);
    const std::vector<uint16_t> x16 = rounded(x, d), y16 = rounded(y, d);
    std::vector<float> ref(N * Ch), mean_ref(N), rstd_ref(N), mean(N), rstd(N);
    std::vector<uint16_t> out16(N * Ch);
    cpu::layernorm_forward(ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), w.data(),
                           b.data(), N, Ch);
    ops.layernorm_forward(Act(out16.data(), d), mean.data(), rstd.data(), ActIn(x16.data(), d),
                          w.data(), b.data(), N, Ch);
    EXPECT_EQ(out16, rounded(ref, d)) << to_string(d) << ": layernorm y";
    EXPECT_TRUE(same_bits(mean, mean_ref) && same_bits(rstd, rstd_ref)) << to_string(d);
    cpu::gelu_forward(ref.data(), x.data(), N * Ch);
    ops.gelu_forward(Act(out16.data(), d), ActIn(x16.data(), d), N * Ch);
    EXPECT_EQ(out16, rounded(ref, d)) << to_string(d) << ": gelu";
    cpu::residual_bias_add(ref.data(), x.data(), y.data(), b.data(), N, Ch);
    ops.residual_bias_add(Act(out16.data(), d), ActIn(x16.data(), d), ActIn(y16.data(), d),
                          b.data(), N, Ch);
    EXPECT_EQ(out16, rounded(ref, d)) << to_string(d) << ": residual into out";
    std::vector<uint16_t> in_place = y16;
    ops.residual_bias_add(Act(in_place.data(), d), ActIn(x16.data(), d),
                          ActIn(in_place.data(), d), b.data(), N, Ch);
    EXPECT_EQ(in_place, rounded(ref, d)) << to_string(d) << ": residual in place";
  }
}

// The backwards of LayerNorm (accumulating dx, dw, db), GELU and the bias on 16-bit dy and x: the
// fp32 kernels on the widened values, bit for bit (their outputs are fp32).
TEST(StoredActivations, BackwardsReadSixteenBitInputsAsTheFp32KernelsDo) {
  KernelOps& ops = kernel_ops(Device::kCPU);
  constexpr int N = 7, Ch = 40;
  const std::vector<float> w = values(Ch, 3, DType::kF32), b = values(Ch, 4, DType::kF32);
  for (DType d : {DType::kBF16, DType::kF16}) {
    const std::vector<float> x = values(N * Ch, 8, d), dy = values(N * Ch, 9, d);
    const std::vector<uint16_t> x16 = rounded(x, d), dy16 = rounded(dy, d);
    std::vector<float> mean(N), rstd(N), y(N * Ch);
    cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                           Ch);
    // dx | dw | db, accumulated onto 0.5: the table on 16-bit dy, x against the fp32 kernel.
    std::vector<float> g(N * Ch + 2 * Ch, 0.5f), ref = g, gw = g, refw = g;
    const float* m = mean.data();
    const float* r = rstd.data();
    ops.layernorm_backward(g.data(), g.data(), g.data() + N * Ch, g.data() + N * Ch + Ch,
                           ActIn(dy16.data(), d), ActIn(x16.data(), d), w.data(), m, r, N, Ch);
    cpu::layernorm_backward(ref.data(), ref.data() + N * Ch, ref.data() + N * Ch + Ch, dy.data(),
                            x.data(), w.data(), m, r, N, Ch);
    EXPECT_TRUE(same_bits(g, ref)) << to_string(d) << ": layernorm_backward";
    // dx as stored = dres + LNᵀ(dy), from another buffer and in place: the fp32 sum rounded once.
    const std::vector<float> dres = values(N * Ch, 10, d);
    std::vector<float> sum = dres;
    cpu::layernorm_backward(sum.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), m, r, N,
                            Ch);
    std::vector<uint16_t> dx16(N * Ch), in_place = rounded(dres, d);
    ops.layernorm_backward(Act(dx16.data(), d), ActIn(in_place.data(), d), nullptr, nullptr,
                           ActIn(dy16.data(), d), ActIn(x16.data(), d), w.data(), m, r, N, Ch);
    EXPECT_EQ(dx16, rounded(sum, d)) << to_string(d) << ": 16-bit dx = dres + LN'";
    ops.layernorm_backward(Act(in_place.data(), d), ActIn(in_place.data(), d), nullptr, nullptr,
                           ActIn(dy16.data(), d), ActIn(x16.data(), d), w.data(), m, r, N, Ch);
    EXPECT_EQ(in_place, dx16) << to_string(d) << ": the same in place";
    ops.layernorm_backward_weight(gw.data() + N * Ch, gw.data() + N * Ch + Ch,
                                  ActIn(dy16.data(), d), ActIn(x16.data(), d), m, r, N, Ch);
    cpu::layernorm_backward_weight(refw.data() + N * Ch, refw.data() + N * Ch + Ch, dy.data(),
                                   x.data(), m, r, N, Ch);
    EXPECT_TRUE(same_bits(gw, refw)) << to_string(d) << ": layernorm_backward_weight";
    std::vector<float> dx(N * Ch), dx_ref(N * Ch), db(Ch, 0.5f), db_ref(Ch, 0.5f);
    ops.gelu_backward(dx.data(), ActIn(x16.data(), d), dy.data(), N * Ch);
    cpu::gelu_backward(dx_ref.data(), x.data(), dy.data(), N * Ch);
    EXPECT_TRUE(same_bits(dx, dx_ref)) << to_string(d) << ": gelu_backward";
    std::vector<uint16_t> g16(N * Ch);  // dx as stored: the fp32 dx rounded once
    ops.gelu_backward(Act(g16.data(), d), ActIn(x16.data(), d), dy.data(), N * Ch);
    EXPECT_EQ(g16, rounded(dx_ref, d)) << to_string(d) << ": gelu_backward, 16-bit dx";
    ops.residual_bias_backward(db.data(), ActIn(dy16.data(), d), N, Ch);
    cpu::residual_bias_backward(db_ref.data(), dy.data(), N, Ch);
    EXPECT_TRUE(same_bits(db, db_ref)) << to_string(d) << ": residual_bias_backward";
  }
}

// The linear layers' entries on 16-bit x, y, dy, dx (under the walk's 16-bit declaration for
// bf16, without one for fp16): the fp32 kernels on the widened values, outputs rounded once;
// dW and db (fp32, accumulated) bit for bit.
TEST(StoredActivations, LinearLayersAreTheFp32KernelsRounded) {
  KernelOps& ops = kernel_ops(Device::kCPU);
  constexpr int N = 9, Ci = 16, OC = 24;
  for (DType d : {DType::kBF16, DType::kF16}) {
    const MatmulOperands declared(ops, d == DType::kBF16 ? d : DType::kF32);
    const std::vector<float> x = values(N * Ci, 10, d), dy = values(N * OC, 11, d);
    const std::vector<float> W = values(Ci * OC, 12, d), b = values(OC, 13, d);
    const std::vector<uint16_t> x16 = rounded(x, d), dy16 = rounded(dy, d);
    Tensor xt = f32_tensor(x), dyt = f32_tensor(dy);
    Tensor ref = Tensor::empty({N * OC}, DType::kF32, MemCategory::kOther);
    cpu::matmul_forward(ref.f32(), xt.f32(), W.data(), b.data(), N, Ci, OC);
    std::vector<uint16_t> y16(N * OC);
    ops.matmul_forward(Act(y16.data(), d), ActIn(x16.data(), d), W.data(), b.data(), N, Ci, OC);
    EXPECT_EQ(y16, rounded(to_vector(ref), d)) << to_string(d) << ": y";
    Tensor dx_ref = Tensor::empty({N * Ci}, DType::kF32, MemCategory::kOther);
    cpu::matmul_backward_input(dx_ref.f32(), dyt.f32(), W.data(), N, Ci, OC);
    std::vector<uint16_t> dx16(N * Ci);
    ops.matmul_backward_input(Act(dx16.data(), d), ActIn(dy16.data(), d), W.data(), N, Ci, OC);
    EXPECT_EQ(dx16, rounded(to_vector(dx_ref), d)) << to_string(d) << ": dx";
    std::vector<float> dW(Ci * OC, 0.5f), db(OC, 0.5f), dW_ref = dW, db_ref = db;
    cpu::matmul_backward_weight(dW_ref.data(), db_ref.data(), dyt.f32(), xt.f32(), N, Ci, OC);
    ops.matmul_backward_weight(dW.data(), db.data(), ActIn(dy16.data(), d), ActIn(x16.data(), d),
                               N, Ci, OC);
    EXPECT_TRUE(same_bits(dW, dW_ref) && same_bits(db, db_ref)) << to_string(d) << ": dW, db";
  }
}

// Under a 16-bit declaration a GPU writes a 16-bit y by broadcasting the bias into it first, in
// 16 bits: exact only for a bias of that dtype, so the CPU checks the bias as it checks x and W.
TEST(StoredActivations, TheDeclaredProductsBiasIsChecked) {
  KernelOps& ops = kernel_ops(Device::kCPU);
  constexpr int N = 3, Ci = 4, OC = 5;
  const std::vector<float> x = values(N * Ci, 14, DType::kBF16),
                           W = values(Ci * OC, 15, DType::kBF16);
  std::vector<float> b = values(OC, 16, DType::kBF16), y(N * OC);
  const MatmulOperands declared(ops, DType::kBF16);
  ops.matmul_forward(y.data(), x.data(), W.data(), b.data(), N, Ci, OC);  // exact: accepted
  b[3] = 0.1f;
  try {
    ops.matmul_forward(y.data(), x.data(), W.data(), b.data(), N, Ci, OC);
    FAIL() << "a bias of no bf16 value was accepted under a bf16 declaration";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul_forward: bias[3]"), std::string::npos) << e.what();
  }
}

TEST(StoredActivations, Fp32AttIsPItselfAndTheCopyIsCountedScratch) {
  std::vector<float> buf(kProbs, 1.5f);
  const int64_t before = MemoryTracker::instance().current(Device::kCPU, MemCategory::kOther);
  {
    Fp32Copy same(buf.data(), DType::kF32, kProbs, Device::kCPU, true, true);
    EXPECT_EQ(same.get(), buf.data());
    std::vector<uint16_t> p16(kProbs);
    cpu::round_to(buf.data(), p16.data(), DType::kBF16, kProbs);
    Fp32Copy copy(p16.data(), DType::kBF16, kProbs, Device::kCPU, /*load=*/true, /*store=*/true);
    EXPECT_EQ(MemoryTracker::instance().current(Device::kCPU, MemCategory::kOther) - before,
              kProbs * 4);
    EXPECT_EQ(copy.get()[7], 1.5f);  // widened
    copy.get()[7] = 2.5f;
    copy.store();
    std::vector<float> back(kProbs);
    cpu::widen(p16.data(), DType::kBF16, back.data(), kProbs);
    EXPECT_EQ(back[7], 2.5f);  // rounded back into the 16-bit buffer
  }
  EXPECT_EQ(MemoryTracker::instance().current(Device::kCPU, MemCategory::kOther), before);
}

TEST(StoredActivations, ABadAttDtypeIsRefusedByName) {
  std::vector<float> qkv(B * T * 3 * C, 0.0f), out(B * T * C);
  std::vector<double> att(kProbs);
  try {
    kernel_ops(Device::kCPU)
        .attention_forward(out.data(), Act(att.data(), DType::kF64), qkv.data(), B, T, C, H);
    FAIL() << "an f64 att was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmp
