// The blockwise online-softmax kernels (attention_block.h) against the whole-sequence causal
// attention of attention.h, on whole sequences and on a sequence cut into two key blocks.
//
//   WholeSequence*  one call with the pairs {{diagonal, skip}, {full, diagonal}} over T rows is
//                   the full causal attention: out, lse and (backward) dqkv must match
//   TwoBlocks*      queries of the second half of a 2T sequence meet their own block first and
//                   the first half's block second (the ring's order), so the running max grows
//                   on the second call and the rescaling e^(m − m') is exercised
//   Flops*          the FLOPs the CPU kernels count == attention_block_flops (what the CUDA table
//                   counts for the same call)
//
// Bound: 1e-5 of max(1, max |reference|). Both sides sum the same fp32 terms (≤ 2T = 32 of them
// per output, inputs in [-1, 1)) in another order, and the online softmax divides by l once at
// the end where attention.h normalises P first: a few ulp of the largest value.
//
// Glossary: B batch, T sequence (= Tl, the rows of a block), C channels, H heads, hs = C/H.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_block.h"
#include "kernels/cpu/flops.h"
#include "kernels/cpu/grad_check.h"

namespace llmp {
namespace cpu {
namespace {

using Vec = std::vector<float>;
constexpr int B = 2, T = 16, C = 16, H = 2, hs = C / H;
constexpr double kBound = 1e-5;
constexpr ChunkPair S = ChunkPair::kSkip, Dg = ChunkPair::kDiagonal, F = ChunkPair::kFull;
constexpr BlockPairs kWhole{{{Dg, S}, {F, Dg}}};  // a whole causal sequence of T rows
constexpr BlockPairs kEarlier{{{F, F}, {F, F}}};  // a block entirely before the queries

Vec rand_vec(size_t n, uint64_t seed) {
  Vec v(n);
  testing::fill_uniform(v.data(), n, seed, -1.0f, 1.0f);
  return v;
}

/// max |got − ref| / max(1, max |ref|), printed.
double rel(const Vec& got, const Vec& ref, const char* what) {
  double d = 0, s = 1;
  for (size_t i = 0; i < ref.size(); ++i) {
    d = std::max(d, std::abs(double(got[i]) - ref[i]));
    s = std::max(s, std::abs(double(ref[i])));
  }
  std::printf("%-24s relative difference %.3g\n", what, d / s);
  return d / s;
}

/// The block kernels' forward of qkv (B,T,3C) over the given key blocks (each a (B,T,3C) buffer
/// whose k, v columns are used), in order; out (B,T,C) and lse (B,H,T).
void block_forward(Vec& out, Vec& lse, const Vec& qkv, const std::vector<const Vec*>& blocks,
                   const std::vector<BlockPairs>& pairs) {
  Vec m(B * H * T, -std::numeric_limits<float>::infinity()), l(B * H * T, 0.0f),
      scores(T * T);
  out.assign(B * T * C, 0.0f);
  lse.assign(B * H * T, 0.0f);
  for (size_t s = 0; s < blocks.size(); ++s)
    attention_block_forward(out.data(), C, m.data(), l.data(), scores.data(), qkv.data(), 3 * C,
                            blocks[s]->data() + C, blocks[s]->data() + 2 * C, 3 * C, B, H, T, hs,
                            pairs[s]);
  attention_block_finalize(out.data(), C, lse.data(), m.data(), l.data(), B, H, T, hs);
}

TEST(AttentionBlock, WholeSequenceForwardMatchesAttention) {
  const Vec qkv = rand_vec(B * T * 3 * C, 1);
  Vec ref(B * T * C), att(B * H * T * T);
  attention_forward(ref.data(), att.data(), qkv.data(), B, T, C, H);
  Vec out, lse;
  block_forward(out, lse, qkv, {&qkv}, {kWhole});
  EXPECT_LE(rel(out, ref, "block forward out"), kBound);
  // lse = log Σ_{j≤i} exp(S_ij), in double from the definition.
  Vec lse_ref(B * H * T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        double sum = 0;
        for (int j = 0; j <= i; ++j) {
          double s = 0;
          for (int e = 0; e < hs; ++e)
            s += double(qkv[(b * T + i) * 3 * C + h * hs + e]) *
                 qkv[(b * T + j) * 3 * C + C + h * hs + e];
          sum += std::exp(s / std::sqrt(double(hs)));
        }
        lse_ref[(b * H + h) * T + i] = static_cast<float>(std::log(sum));
      }
  EXPECT_LE(rel(lse, lse_ref, "block forward lse"), kBound);
}

TEST(AttentionBlock, TwoBlocksOnlineSoftmaxMatchesTheSecondHalf) {
  // A sequence of 2T positions; the queries are its rows [T, 2T).
  const int T2 = 2 * T;
  const Vec whole = rand_vec(B * T2 * 3 * C, 2);
  Vec ref2(B * T2 * C), att(B * H * T2 * T2);
  attention_forward(ref2.data(), att.data(), whole.data(), B, T2, C, H);
  Vec first(B * T * 3 * C), second(B * T * 3 * C), ref(B * T * C);
  for (int b = 0; b < B; ++b) {
    std::copy_n(whole.data() + b * T2 * 3 * C, T * 3 * C, first.data() + b * T * 3 * C);
    std::copy_n(whole.data() + (b * T2 + T) * 3 * C, T * 3 * C, second.data() + b * T * 3 * C);
    std::copy_n(ref2.data() + (b * T2 + T) * C, T * C, ref.data() + b * T * C);
  }
  Vec out, lse;
  block_forward(out, lse, second, {&second, &first}, {kWhole, kEarlier});  // own block first
  EXPECT_LE(rel(out, ref, "two blocks out"), kBound);
}

TEST(AttentionBlock, WholeSequenceBackwardMatchesAttention) {
  const Vec qkv = rand_vec(B * T * 3 * C, 3), dout = rand_vec(B * T * C, 4);
  Vec out_ref(B * T * C), att(B * H * T * T), ref(B * T * 3 * C), scratch(T * T);
  attention_forward(out_ref.data(), att.data(), qkv.data(), B, T, C, H);
  attention_backward(ref.data(), dout.data(), qkv.data(), att.data(), scratch.data(), B, T, C, H);
  Vec out, lse;
  block_forward(out, lse, qkv, {&qkv}, {kWhole});
  Vec D(B * H * T), P(T * T), dS(T * T), dqkv(B * T * 3 * C, 0.0f);
  attention_block_rowdot(D.data(), dout.data(), out.data(), C, B, H, T, hs);
  // dq, dk, dv straight into the q, k, v columns of dqkv (B,T,3C): rows of 3C floats.
  attention_block_backward(dqkv.data(), dqkv.data() + C, dqkv.data() + 2 * C, 3 * C, P.data(),
                           dS.data(), qkv.data(), 3 * C, qkv.data() + C, qkv.data() + 2 * C,
                           3 * C, dout.data(), C, lse.data(), D.data(), B, H, T, hs, kWhole);
  EXPECT_LE(rel(dqkv, ref, "block backward dqkv"), kBound);
}

TEST(AttentionBlock, FlopsCountedEqualTheFormulaOfTheCudaTable) {
  const Vec qkv = rand_vec(B * T * 3 * C, 5), dout = rand_vec(B * T * C, 6);
  for (const BlockPairs& pairs : {kWhole, kEarlier, BlockPairs{{{S, S}, {F, Dg}}}}) {
    Vec m(B * H * T, -std::numeric_limits<float>::infinity()), l(B * H * T, 0.0f), o(B * T * C),
        sc(T * T), P(T * T), dS(T * T), lse(B * H * T, 0.0f), D(B * H * T, 0.0f),
        g(B * T * 3 * C, 0.0f);
    int64_t before = flops_done();
    attention_block_forward(o.data(), C, m.data(), l.data(), sc.data(), qkv.data(), 3 * C,
                            qkv.data() + C, qkv.data() + 2 * C, 3 * C, B, H, T, hs, pairs);
    EXPECT_EQ(flops_done() - before, attention_block_flops(pairs, B, H, T, hs, 2));
    before = flops_done();
    attention_block_backward(g.data(), g.data() + C, g.data() + 2 * C, 3 * C, P.data(), dS.data(),
                             qkv.data(), 3 * C, qkv.data() + C, qkv.data() + 2 * C, 3 * C,
                             dout.data(), C, lse.data(), D.data(), B, H, T, hs, pairs);
    EXPECT_EQ(flops_done() - before, attention_block_flops(pairs, B, H, T, hs, 5));
  }
}

TEST(AttentionBlock, CopyColumnsCopiesTheRowPrefixesOnly) {
  const Vec src = rand_vec(4 * 6, 7);
  Vec dst(4 * 5, -9.0f);
  copy_columns(dst.data() + 1, 5, src.data() + 2, 6, 4, 3);  // src cols [2,5) -> dst cols [1,4)
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      EXPECT_EQ(dst[i * 5 + j], j >= 1 && j < 4 ? src[i * 6 + j + 1] : -9.0f) << i << "," << j;
}

}  // namespace
}  // namespace cpu
}  // namespace llmp
