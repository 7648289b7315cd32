// The test sequences of the tensor-core blockwise attention (attention_block_tc.h) and what the
// kernels/cpu twins make of them: shared by the GPU twin test (attention_block_tc_twin_test.cc,
// SKIPPED without a GPU) and the emulated one (attention_block_tc_emulated_test.cc, which runs
// the same kernels on the CPU). No CUDA. Test-only.
//
// A sequence: forward steps (each continuing the running m, l, O), finalize, rowdot, then
// backward steps, over q in qkv (B,Tl,3A), k|v in a block (B,Tl,2A), dout and out (B,Tl,A), with
// every input a bf16 value (what the bf16 declaration promises the tensor-core kernels).
//
// Bounds, relative to max(1, max|ref|): lse 1e-4 (S from exact bf16 inputs with fp32
// accumulation, the statistics in fp32: only the summation order differs); out 1e-2 (P~ rounded
// to bf16 before P~V: each term off by at most 2⁻⁹ relative, so out by 2⁻⁹·max|v| = 2e-3 with
// |v| ≤ 1, plus l's share; 5× headroom); dq, dk, dv 2e-2 (dS, and P for dV, rounded to bf16 the
// same way; dq = Σ_j dS_ij k_j sums terms of both signs, so its error is bounded by 2⁻⁹·Σ|dS||k|,
// not by |dq|). D 1e-5 (the CUDA-core rowdot). Derived, not fitted: the emulated test measures
// the margins on every run (it prints them) and a GPU run will too.
#pragma once

#include <vector>

#include "kernels/cpu/attention_block.h"
#include "kernels/cuda/twin_compare.h"

namespace llmp {
namespace test {

constexpr cpu::ChunkPair kSkipPair = cpu::ChunkPair::kSkip, kDiagPair = cpu::ChunkPair::kDiagonal,
                         kFullPair = cpu::ChunkPair::kFull;
/// A whole causal block (flash attention's one call), a ring step on an earlier block, and one
/// whose first query chunk sees nothing (ring attention's later step).
constexpr cpu::BlockPairs kOwn{{{kDiagPair, kSkipPair}, {kFullPair, kDiagPair}}},
    kEarlier{{{kFullPair, kFullPair}, {kFullPair, kFullPair}}},
    kLater{{{kSkipPair, kSkipPair}, {kFullPair, kDiagPair}}};
constexpr float kTcLse = 1e-4f, kTcOut = 1e-2f, kTcGrad = 2e-2f, kTcRow = 1e-5f;

/// One sequence of calls: shapes, the chunk pairs of each forward and backward step, the seed.
struct TcCase {
  int B, H, Tl, hs;
  std::vector<cpu::BlockPairs> forward, backward;
  unsigned seed;
  int A() const { return H * hs; }
  int rows() const { return B * H * Tl; }  ///< of m, l, lse, D: (B,H,Tl)
};

/// The inputs of a case and the kernels/cpu twins' results.
struct TcReference {
  Vec qkv, blk, dout;  ///< inputs (bf16 values)
  Vec o, lse, D;       ///< after the forward steps and finalize; D = rowdot(dout, o)
  Vec dq, dkv;         ///< accumulated over the backward steps from o, lse, D above
};

/// Runs the case's calls through kernels/cpu (attention_block.h).
TcReference cpu_reference(const TcCase& c);

}  // namespace test
}  // namespace llmp
