// The tensor-core blockwise attention's kernels (attention_block_tc_kernels.h), the very source
// nvcc builds for the GPU, compiled by g++ with the CUDA emulator (kernels/cuda/emulator) and run
// on the CPU against the kernels/cpu twins: the sequences and bounds of the GPU twin test
// (attention_block_tc_reference.h), with the same grids, block size, shared memory and scale as
// attention_block_tc.cu's launches. Runs on any machine, no GPU or CUDA toolkit needed.
//
// What it shows: the tiling, the visibility mask, the online softmax, the two backward passes,
// the WMMA operand layouts (row_major A, col_major Bᵀ, accumulators in and out), the pointers and
// strides the tensor cores require, and the barriers between the block's threads (the emulator
// runs each thread until its next barrier, so a missing one reads stale or NaN shared memory).
// What it cannot show: speed, and the hardware's own summation order inside an mma.
//
// finalize and rowdot are the CUDA-core kernels', not these; the test takes the CPU's.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "kernels/cpu/attention_block.h"
#include "kernels/cuda/attention_block_tc_kernels.h"
#include "kernels/cuda/attention_block_tc_reference.h"
#include "kernels/cuda/emulator/block_runner.h"

namespace llmp {
namespace {

using namespace test;      // NOLINT: the sequences and bounds (attention_block_tc_reference.h)
using namespace cuda::tc;  // NOLINT: the kernels and their layouts

/// What the kernels made of a case: out and lse after the forward steps (finalized on the
/// CPU), dq and dk|dv after the backward steps run from the reference's out, lse and D.
struct TcOutputs {
  Vec o, lse, dq, dkv;
};

template <int HS>
TcOutputs emulate(const TcCase& c, const TcReference& ref) {
  const int B = c.B, H = c.H, Tl = c.Tl, A = c.A(), rows = c.rows();
  const dim3 grid = tile_grid(B, H, Tl), block(kTcThreads);
  const float scale = score_scale(HS), inf = std::numeric_limits<float>::infinity();
  const float *qkv = ref.qkv.data(), *blk = ref.blk.data(), *dout = ref.dout.data();
  TcOutputs out;
  out.o.assign(ref.o.size(), 0.0f);
  Vec m(rows, -inf), l(rows, 0.0f);
  for (const cpu::BlockPairs& p : c.forward)
    cuda::emu::launch(grid, block, Smem<HS>::forward, [&] {
      forward_kernel<HS>(out.o.data(), A, m.data(), l.data(), qkv, 3 * A, blk, blk + A, 2 * A, H,
                         Tl, p, scale);
    });
  out.lse.resize(rows);
  cpu::attention_block_finalize(out.o.data(), A, out.lse.data(), m.data(), l.data(), B, H, Tl,
                                c.hs);
  out.dq.assign(ref.dq.size(), 0.0f);
  out.dkv.assign(ref.dkv.size(), 0.0f);
  float *dq = out.dq.data(), *dk = out.dkv.data(), *dv = out.dkv.data() + A;
  const float *lse = ref.lse.data(), *D = ref.D.data();
  for (const cpu::BlockPairs& p : c.backward) {
    cuda::emu::launch(grid, block, Smem<HS>::dq, [&] {
      backward_dq_kernel<HS>(dq, qkv, 3 * A, blk, blk + A, 2 * A, dout, A, lse, D, H, Tl, p, scale);
    });
    cuda::emu::launch(grid, block, Smem<HS>::dkv, [&] {
      backward_dkv_kernel<HS>(dk, dv, 2 * A, qkv, 3 * A, blk, blk + A, 2 * A, dout, A, lse, D, H,
                              Tl, p, scale);
    });
  }
  return out;
}

void run_sequence(const TcCase& c) {
  const TcReference ref = cpu_reference(c);
  TcOutputs got;
  switch (c.hs) {
    case 16:
      got = emulate<16>(c, ref);
      break;
    case 32:
      got = emulate<32>(c, ref);
      break;
    case 64:
      got = emulate<64>(c, ref);
      break;
    case 128:
      got = emulate<128>(c, ref);
      break;
    default:
      FAIL() << "hs " << c.hs << " has no tensor-core kernel";
  }
  const std::string at = " (Tl=" + std::to_string(c.Tl) + ", hs=" + std::to_string(c.hs) + ")";
  EXPECT_LE(rel_err(got.o, ref.o, "emulated tc out"), kTcOut) << at;
  EXPECT_LE(rel_err(got.lse, ref.lse, "emulated tc lse"), kTcLse) << at;
  EXPECT_LE(rel_err(got.dq, ref.dq, "emulated tc dq"), kTcGrad) << at;
  EXPECT_LE(rel_err(got.dkv, ref.dkv, "emulated tc dk|dv"), kTcGrad) << at;
}

TEST(AttentionBlockTcEmulated, FlashAttentionsWholeCausalBlock) {
  run_sequence(TcCase{/*B=*/2, /*H=*/2, /*Tl=*/130, /*hs=*/64, {kOwn}, {kOwn}, 51});
}

TEST(AttentionBlockTcEmulated, RingStepsContinueTheRunningState) {
  run_sequence(
      TcCase{/*B=*/2, /*H=*/3, /*Tl=*/80, /*hs=*/16, {kOwn, kEarlier}, {kEarlier, kLater}, 61});
}

// The other two head sizes the switch takes (attention_block_tc.cu), whose shared memory differs
// most: hs = 128 asks for 176 KiB in the dK|dV pass (within an H100's 227, over an A100's 163).
TEST(AttentionBlockTcEmulated, HeadSizes32And128) {
  run_sequence(TcCase{/*B=*/1, /*H=*/2, /*Tl=*/66, /*hs=*/32, {kOwn}, {kOwn}, 71});
  run_sequence(TcCase{/*B=*/1, /*H=*/1, /*Tl=*/96, /*hs=*/128, {kOwn}, {kOwn}, 81});
}

}  // namespace
}  // namespace llmp
