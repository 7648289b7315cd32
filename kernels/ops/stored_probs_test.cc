// The CPU table's attention entries on P stored in 16 bits (kernel_ops.h: att of att_dtype): they
// compute through an fp32 copy (Fp32Copy), so they must give, bit for bit, what the model got
// when it wrapped these calls in common/nn's F32Out and F32In: out the fp32 kernel's, the stored
// P that kernel's P rounded to att_dtype, and dqkv the fp32 kernel's on the stored P widened.
// Also: an f32 att is P itself, the copy is counted as conversion scratch while it lives, and a
// bad att_dtype is refused by name.
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

TEST(StoredProbs, SixteenBitAttIsTheFp32KernelRounded) {
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
    ops.attention_forward(out.data(), att16.data(), d, qkv.data(), B, T, C, H, probs);
    EXPECT_TRUE(same_bits(out, out_ref)) << to_string(d) << ": out";
    EXPECT_EQ(att16, att16_ref) << to_string(d) << ": the stored P";
    std::vector<uint16_t> probs16(kProbs);
    ops.attention_probs(probs16.data(), d, qkv.data(), B, T, C, H, probs);
    EXPECT_EQ(probs16, att16) << to_string(d) << ": recomputation's P";
    std::vector<float> dqkv_ref(qkv.size()), dqkv(qkv.size());
    Tensor P = Tensor::empty({kProbs}, DType::kF32, MemCategory::kOther);  // as F32In made it
    cpu::widen(att16.data(), d, P.f32(), kProbs);
    cpu::attention_backward(dqkv_ref.data(), dout.data(), qkv.data(), P.f32(), scratch.data(), B,
                            T, C, H, probs);
    ops.attention_backward(dqkv.data(), dout.data(), qkv.data(), att16.data(), d, scratch.data(),
                           B, T, C, H, probs);
    EXPECT_TRUE(same_bits(dqkv, dqkv_ref)) << to_string(d) << ": dqkv";
  }
}

TEST(StoredProbs, Fp32AttIsPItselfAndTheCopyIsCountedScratch) {
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

TEST(StoredProbs, ABadAttDtypeIsRefusedByName) {
  std::vector<float> qkv(B * T * 3 * C, 0.0f), out(B * T * C);
  std::vector<double> att(kProbs);
  try {
    kernel_ops(Device::kCPU).attention_forward(out.data(), att.data(), DType::kF64, qkv.data(), B,
                                               T, C, H);
    FAIL() << "an f64 att was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmp
