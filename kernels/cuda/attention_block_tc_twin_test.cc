// The tensor-core blockwise attention (attention_block_tc.h) against the kernels/cpu twins: part
// of kernels_twin_test (SKIPPED without a GPU, with the runtime's reason). NOT YET RUN ON A GPU.
//
// Inputs are bf16 values (rounded on the host), and the calls run inside a bf16 declaration
// (SixteenBitOperands), which is what switches the tensor cores on; the test first checks that
// it does (and that without it the CUDA-core kernels run). Two sequences of calls:
//   - flash attention's: one whole causal block of Tl = 130 rows (c = 65: the 64-row tiles cut
//     the chunks, the last tile holds 2 rows), hs = 64 (gpt2's), forward, finalize, rowdot,
//     backward;
//   - ring attention's: Tl = 80, hs = 16, two forward steps (the second continues the running
//     m, l, O), finalize, then two backward steps, one skipping a query chunk.
//
// Bounds, relative to max(1, max|ref|) (printed): lse 1e-4 (S from exact bf16 inputs with fp32
// accumulation, the statistics in fp32: only the summation order differs); out 1e-2 (P~ rounded
// to bf16 before P~V: each term off by at most 2⁻⁹ relative, so out by 2⁻⁹·max|v| = 2e-3 with
// |v| ≤ 1, plus l's share; 5× headroom); dq, dk, dv 2e-2 (dS, and P for dV, rounded to bf16 the
// same way; dq = Σ_j dS_ij k_j sums terms of both signs, so its error is bounded by 2⁻⁹·Σ|dS||k|,
// not by |dq|). D 1e-5 (the CUDA-core rowdot, unchanged). These are derived, not yet measured.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/attention_block.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/attention_block.h"
#include "kernels/cuda/attention_block_tc.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/twin_test_util.h"

namespace llmp {
namespace {

using cpu::BlockPairs;
using test::DevF;
using test::rel_err;
using test::Vec;
constexpr cpu::ChunkPair S = cpu::ChunkPair::kSkip, Dg = cpu::ChunkPair::kDiagonal,
                         F = cpu::ChunkPair::kFull;
constexpr BlockPairs kOwn{{{Dg, S}, {F, Dg}}}, kEarlier{{{F, F}, {F, F}}},
    kLater{{{S, S}, {F, Dg}}};
constexpr float kLse = 1e-4f, kOut = 1e-2f, kGrad = 2e-2f, kRow = 1e-5f;

/// n uniform values in [-1, 1], each a bf16 value.
Vec bf16_values(size_t n, unsigned seed) {
  Vec v = test::rnd(n, seed);
  std::vector<uint16_t> bits(n);
  cpu::round_to(v.data(), bits.data(), DType::kBF16, static_cast<int64_t>(n));
  cpu::widen(bits.data(), DType::kBF16, v.data(), static_cast<int64_t>(n));
  return v;
}

class KernelsTwinAttentionBlockTc : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
    cuda::set_tf32(false);
  }
};

/// The forward steps, finalize, rowdot and backward steps on the CPU and on the GPU (inside a
/// bf16 declaration), compared. q in qkv (B,Tl,3A); k|v in a block (B,Tl,2A); out (B,Tl,A).
void run_sequence(int B, int H, int Tl, int hs, const std::vector<BlockPairs>& forward,
                  const std::vector<BlockPairs>& backward, unsigned seed) {
  const int A = H * hs, rows = B * H * Tl;
  const Vec qkv = bf16_values(size_t(B) * Tl * 3 * A, seed),
            blk = bf16_values(size_t(B) * Tl * 2 * A, seed + 1),
            dout = bf16_values(size_t(B) * Tl * A, seed + 2);
  const float inf = std::numeric_limits<float>::infinity();
  Vec o(size_t(B) * Tl * A, 0.0f), m(rows, -inf), l(rows, 0.0f), lse(rows), D(rows),
      sc(size_t(Tl) * Tl), P(size_t(Tl) * Tl), dS(size_t(Tl) * Tl), dq(qkv.size(), 0.0f),
      dkv(blk.size(), 0.0f);
  for (const BlockPairs& p : forward)
    cpu::attention_block_forward(o.data(), A, m.data(), l.data(), sc.data(), qkv.data(), 3 * A,
                                 blk.data(), blk.data() + A, 2 * A, B, H, Tl, hs, p);
  cpu::attention_block_finalize(o.data(), A, lse.data(), m.data(), l.data(), B, H, Tl, hs);
  cpu::attention_block_rowdot(D.data(), dout.data(), o.data(), A, B, H, Tl, hs);
  for (const BlockPairs& p : backward)
    cpu::attention_block_backward(dq.data(), dkv.data(), dkv.data() + A, 2 * A, P.data(),
                                  dS.data(), qkv.data(), 3 * A, blk.data(), blk.data() + A, 2 * A,
                                  dout.data(), A, lse.data(), D.data(), B, H, Tl, hs, p);

  EXPECT_FALSE(cuda::attention_block_tc(B, H, hs)) << "no declaration: the CUDA-core kernels";
  const cuda::SixteenBitOperands bf16(CUDA_R_16BF);
  ASSERT_TRUE(cuda::attention_block_tc(B, H, hs)) << "hs=" << hs << ": tensor cores expected";
  DevF qkv_d(qkv), blk_d(blk), dout_d(dout), o_d(Vec(o.size(), 0.0f)), m_d(Vec(rows, -inf)),
      l_d(Vec(rows, 0.0f)), lse_d(rows), D_d(rows), dq_d(Vec(dq.size(), 0.0f)),
      dkv_d(Vec(dkv.size(), 0.0f));
  for (const BlockPairs& p : forward)
    cuda::attention_block_forward(o_d.p, A, m_d.p, l_d.p, nullptr, qkv_d.p, 3 * A, blk_d.p,
                                  blk_d.p + A, 2 * A, B, H, Tl, hs, p);
  cuda::attention_block_finalize(o_d.p, A, lse_d.p, m_d.p, l_d.p, B, H, Tl, hs);
  const std::string at = " (Tl=" + std::to_string(Tl) + ", hs=" + std::to_string(hs) + ")";
  EXPECT_LE(rel_err(o_d.get(), o, "tc out"), kOut) << at;
  EXPECT_LE(rel_err(lse_d.get(), lse, "tc lse"), kLse) << at;
  // The backward from the CPU's out, lse and D, so that it is checked on its own.
  DevF o_ref(o), lse_ref(lse);
  cuda::attention_block_rowdot(D_d.p, dout_d.p, o_ref.p, A, B, H, Tl, hs);
  EXPECT_LE(rel_err(D_d.get(), D, "tc D"), kRow) << at;
  DevF D_ref(D);
  for (const BlockPairs& p : backward)
    cuda::attention_block_backward(dq_d.p, dkv_d.p, dkv_d.p + A, 2 * A, nullptr, nullptr, qkv_d.p,
                                   3 * A, blk_d.p, blk_d.p + A, 2 * A, dout_d.p, A, lse_ref.p,
                                   D_ref.p, B, H, Tl, hs, p);
  EXPECT_LE(rel_err(dq_d.get(), dq, "tc dq"), kGrad) << at;
  EXPECT_LE(rel_err(dkv_d.get(), dkv, "tc dk|dv"), kGrad) << at;
}

TEST_F(KernelsTwinAttentionBlockTc, FlashAttentionsWholeCausalBlock) {
  run_sequence(/*B=*/2, /*H=*/2, /*Tl=*/130, /*hs=*/64, {kOwn}, {kOwn}, 51);
}

TEST_F(KernelsTwinAttentionBlockTc, RingStepsContinueTheRunningState) {
  run_sequence(/*B=*/2, /*H=*/3, /*Tl=*/80, /*hs=*/16, {kOwn, kEarlier}, {kEarlier, kLater}, 61);
}

}  // namespace
}  // namespace llmp
