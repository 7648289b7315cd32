// Ring attention's block kernels (attention_block.h) against their kernels/cpu twins: part of
// kernels_twin_test (the same skip without a GPU: every KernelsTwinAttentionBlock test is
// SKIPPED with the runtime's reason).
//
// One ring-like sequence of calls on the layouts the core uses (q in qkv (B,Tl,3A), k|v in a
// block (B,Tl,2A), out (B,Tl,A)): two forward steps (own block with the causal pairs, then an
// earlier block, all pairs full, so the running max is rescaled), finalize; then rowdot and two
// backward steps (the second with a block whose first query chunk is skipped).
//
// Bounds (relative to max(1, max|ref|), printed): out, lse, dq, dk, dv 5e-5 (the GPU sums the
// same fp32 terms in another order: dot products over hs = 12 by a warp butterfly, sums over
// ≤ 2·Tl = 68 keys one by one where Eigen blocks them, expf/logf ≤ 2 ulp; kernels_twin_test's
// GEMM bound for sums of ≤ 80 terms); D 1e-5 (a row reduction of hs terms); copy_columns 0.
//
// Shapes: B = 2, Tl = 34 (c = 17: chunks not a multiple of 32), A = 48, H = 4 (hs = 12 < 32,
// so lanes idle in the channel loops).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/attention_block.h"
#include "kernels/cuda/attention_block.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/twin_test_util.h"

namespace llmp {
namespace {

using cpu::BlockPairs;
using test::DevF;
using test::rel_err;
using test::rnd;
using test::Vec;
constexpr float kSum = 5e-5f, kRow = 1e-5f;
constexpr int B = 2, Tl = 34, A = 48, H = 4, hs = A / H;
constexpr cpu::ChunkPair S = cpu::ChunkPair::kSkip, Dg = cpu::ChunkPair::kDiagonal,
                         F = cpu::ChunkPair::kFull;
constexpr BlockPairs kOwn{{{Dg, S}, {F, Dg}}}, kEarlier{{{F, F}, {F, F}}},
    kLater{{{S, S}, {F, Dg}}};

using KernelsTwinAttentionBlock = test::GpuTwin;

TEST_F(KernelsTwinAttentionBlock, ForwardStepsFinalizeRowdotAndBackwardSteps) {
  const Vec qkv = rnd(B * Tl * 3 * A, 41), blk0 = rnd(B * Tl * 2 * A, 42),
            blk1 = rnd(B * Tl * 2 * A, 43), dout = rnd(B * Tl * A, 44);
  const int rows = B * H * Tl;
  // CPU: the reference sequence of calls.
  Vec o(B * Tl * A, 0.0f), m(rows, -std::numeric_limits<float>::infinity()), l(rows, 0.0f),
      lse(rows), D(rows), sc(Tl * Tl), P(Tl * Tl), dS(Tl * Tl), dq(B * Tl * 3 * A, 0.0f),
      dkv(B * Tl * 2 * A, 0.0f);
  cpu::attention_block_forward(o.data(), A, m.data(), l.data(), sc.data(), qkv.data(), 3 * A,
                               blk0.data(), blk0.data() + A, 2 * A, B, H, Tl, hs, kOwn);
  cpu::attention_block_forward(o.data(), A, m.data(), l.data(), sc.data(), qkv.data(), 3 * A,
                               blk1.data(), blk1.data() + A, 2 * A, B, H, Tl, hs, kEarlier);
  cpu::attention_block_finalize(o.data(), A, lse.data(), m.data(), l.data(), B, H, Tl, hs);
  cpu::attention_block_rowdot(D.data(), dout.data(), o.data(), A, B, H, Tl, hs);
  for (const BlockPairs& pairs : {kEarlier, kLater})
    cpu::attention_block_backward(dq.data(), dkv.data(), dkv.data() + A, 2 * A, P.data(),
                                  dS.data(), qkv.data(), 3 * A, blk0.data(), blk0.data() + A,
                                  2 * A, dout.data(), A, lse.data(), D.data(), B, H, Tl, hs,
                                  pairs);
  // GPU: the same calls on device copies.
  DevF qkv_d(qkv), b0_d(blk0), b1_d(blk1), dout_d(dout), o_d(Vec(o.size(), 0.0f)),
      m_d(Vec(rows, -std::numeric_limits<float>::infinity())), l_d(Vec(rows, 0.0f)), lse_d(rows),
      D_d(rows), dq_d(Vec(dq.size(), 0.0f)), dkv_d(Vec(dkv.size(), 0.0f));
  cuda::attention_block_forward(o_d.p, A, m_d.p, l_d.p, nullptr, qkv_d.p, 3 * A, b0_d.p,
                                b0_d.p + A, 2 * A, B, H, Tl, hs, kOwn);
  cuda::attention_block_forward(o_d.p, A, m_d.p, l_d.p, nullptr, qkv_d.p, 3 * A, b1_d.p,
                                b1_d.p + A, 2 * A, B, H, Tl, hs, kEarlier);
  cuda::attention_block_finalize(o_d.p, A, lse_d.p, m_d.p, l_d.p, B, H, Tl, hs);
  EXPECT_LE(rel_err(o_d.get(), o, "block out"), kSum);
  EXPECT_LE(rel_err(lse_d.get(), lse, "block lse"), kSum);
  // The backward from the CPU's out and lse, so that it is checked on its own.
  DevF o_ref(o), lse_ref(lse);
  cuda::attention_block_rowdot(D_d.p, dout_d.p, o_ref.p, A, B, H, Tl, hs);
  EXPECT_LE(rel_err(D_d.get(), D, "block D"), kRow);
  DevF D_ref(D);
  for (const BlockPairs& pairs : {kEarlier, kLater})
    cuda::attention_block_backward(dq_d.p, dkv_d.p, dkv_d.p + A, 2 * A, nullptr, nullptr,
                                   qkv_d.p, 3 * A, b0_d.p, b0_d.p + A, 2 * A, dout_d.p, A,
                                   lse_ref.p, D_ref.p, B, H, Tl, hs, pairs);
  EXPECT_LE(rel_err(dq_d.get(), dq, "block dq"), kSum);
  EXPECT_LE(rel_err(dkv_d.get(), dkv, "block dk|dv"), kSum);
}

TEST_F(KernelsTwinAttentionBlock, CopyColumnsIsExact) {
  const Vec qkv = rnd(B * Tl * 3 * A, 45);
  Vec kv(B * Tl * 2 * A);
  cpu::copy_columns(kv.data(), 2 * A, qkv.data() + A, 3 * A, B * Tl, 2 * A);
  DevF qkv_d(qkv), kv_d(kv.size());
  cuda::copy_columns(kv_d.p, 2 * A, qkv_d.p + A, 3 * A, B * Tl, 2 * A);
  EXPECT_EQ(rel_err(kv_d.get(), kv, "copy_columns"), 0.0f);
}

}  // namespace
}  // namespace llmp
