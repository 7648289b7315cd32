// The tensor-core blockwise attention (attention_block_tc.h) on a GPU against the kernels/cpu
// twins: part of kernels_twin_test (SKIPPED without a GPU, with the runtime's reason). NOT YET RUN
// ON A GPU; the same kernels run on the CPU under the emulator in
// attention_block_tc_emulated_test, with the same sequences and bounds.
//
// The calls run inside a bf16 declaration (SixteenBitOperands), which is what switches the tensor
// cores on; the test first checks that it does (and that without it the CUDA-core kernels run).
// The sequences, their inputs (bf16 values) and the bounds with their derivation:
// attention_block_tc_reference.h.
//   - flash attention's: one whole causal block of Tl = 130 rows (c = 65: the 64-row tiles cut
//     the chunks, the last tile holds 2 rows), hs = 64 (gpt2's);
//   - ring attention's: Tl = 80, hs = 16, two forward steps (the second continues the running
//     m, l, O), then two backward steps, one skipping a query chunk.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "kernels/cuda/attention_block.h"
#include "kernels/cuda/attention_block_tc.h"
#include "kernels/cuda/attention_block_tc_reference.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/twin_test_util.h"

namespace llmp {
namespace {

using namespace test;  // NOLINT: the sequences and bounds (attention_block_tc_reference.h)

using KernelsTwinAttentionBlockTc = test::GpuTwin;

/// The case's calls on the GPU (inside a bf16 declaration) against cpu_reference's results.
void run_sequence(const TcCase& c) {
  const int B = c.B, H = c.H, Tl = c.Tl, hs = c.hs, A = c.A(), rows = c.rows();
  const TcReference ref = cpu_reference(c);
  EXPECT_FALSE(cuda::attention_block_tc(B, H, hs)) << "no declaration: the CUDA-core kernels";
  const cuda::SixteenBitOperands bf16(CUDA_R_16BF);
  ASSERT_TRUE(cuda::attention_block_tc(B, H, hs)) << "hs=" << hs << ": tensor cores expected";
  const float inf = std::numeric_limits<float>::infinity();
  DevF qkv_d(ref.qkv), blk_d(ref.blk), dout_d(ref.dout), o_d(Vec(ref.o.size(), 0.0f)),
      m_d(Vec(rows, -inf)), l_d(Vec(rows, 0.0f)), lse_d(rows), D_d(rows),
      dq_d(Vec(ref.dq.size(), 0.0f)), dkv_d(Vec(ref.dkv.size(), 0.0f));
  for (const cpu::BlockPairs& p : c.forward)
    cuda::attention_block_forward(o_d.p, A, m_d.p, l_d.p, nullptr, qkv_d.p, 3 * A, blk_d.p,
                                  blk_d.p + A, 2 * A, B, H, Tl, hs, p);
  cuda::attention_block_finalize(o_d.p, A, lse_d.p, m_d.p, l_d.p, B, H, Tl, hs);
  const std::string at = " (Tl=" + std::to_string(Tl) + ", hs=" + std::to_string(hs) + ")";
  EXPECT_LE(rel_err(o_d.get(), ref.o, "tc out"), kTcOut) << at;
  EXPECT_LE(rel_err(lse_d.get(), ref.lse, "tc lse"), kTcLse) << at;
  // The backward from the CPU's out, lse and D, so that it is checked on its own.
  DevF o_ref(ref.o), lse_ref(ref.lse);
  cuda::attention_block_rowdot(D_d.p, dout_d.p, o_ref.p, A, B, H, Tl, hs);
  EXPECT_LE(rel_err(D_d.get(), ref.D, "tc D"), kTcRow) << at;
  DevF D_ref(ref.D);
  for (const cpu::BlockPairs& p : c.backward)
    cuda::attention_block_backward(dq_d.p, dkv_d.p, dkv_d.p + A, 2 * A, nullptr, nullptr, qkv_d.p,
                                   3 * A, blk_d.p, blk_d.p + A, 2 * A, dout_d.p, A, lse_ref.p,
                                   D_ref.p, B, H, Tl, hs, p);
  EXPECT_LE(rel_err(dq_d.get(), ref.dq, "tc dq"), kTcGrad) << at;
  EXPECT_LE(rel_err(dkv_d.get(), ref.dkv, "tc dk|dv"), kTcGrad) << at;
}

TEST_F(KernelsTwinAttentionBlockTc, FlashAttentionsWholeCausalBlock) {
  run_sequence(TcCase{/*B=*/2, /*H=*/2, /*Tl=*/130, /*hs=*/64, {kOwn}, {kOwn}, 51});
}

TEST_F(KernelsTwinAttentionBlockTc, RingStepsContinueTheRunningState) {
  run_sequence(
      TcCase{/*B=*/2, /*H=*/3, /*Tl=*/80, /*hs=*/16, {kOwn, kEarlier}, {kEarlier, kLater}, 61});
}

}  // namespace
}  // namespace llmp
