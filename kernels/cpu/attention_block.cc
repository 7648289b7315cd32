// The blockwise attention kernels (attention_block.h): per (b, h), Eigen products on (c,hs)
// strided views of each chunk, the online softmax row by row in between.
//
// These are the loops common/cp/ring_attention.cc ran inline, moved here unchanged (same Eigen
// expressions, same order of operations), so the ring core on the CPU is bit-identical to before.
#include "kernels/cpu/attention_block.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/flops.h"

namespace llmp {
namespace cpu {
namespace {

using MatR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using Rows = Eigen::Map<MatR, 0, Stride>;  // (c,hs) rows of one head in a wider buffer
using CRows = Eigen::Map<const MatR, 0, Stride>;
using Sq = Eigen::Map<MatR>;  // (Tl,Tl) score block

/// (c,hs) view of chunk j, head h, sequence b of a (B,Tl,·) buffer with rows of `ld` floats.
template <typename M, typename P>
M chunk_view(P* base, int b, int j, int h, int ld, int Tl, int c, int hs) {
  return M(base + (static_cast<long>(b) * Tl + static_cast<long>(j) * c) * ld + h * hs, c, hs,
           Stride(ld));
}

}  // namespace

void attention_block_forward(float* o, int ld_o, float* m, float* l, float* scores,
                             const float* q, int ld_q, const float* k, const float* v, int ld_kv,
                             int B, int H, int Tl, int hs, BlockPairs pairs) {
  const int c = Tl / 2;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  Sq Sm(scores, Tl, Tl);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      float* mr = m + (static_cast<long>(b) * H + h) * Tl;
      float* lr = l + (static_cast<long>(b) * H + h) * Tl;
      for (int qi = 0; qi < 2; ++qi) {
        const ChunkPair* kind = pairs.kind[qi];
        if (kind[0] == ChunkPair::kSkip && kind[1] == ChunkPair::kSkip) continue;
        CRows Q = chunk_view<CRows>(q, b, qi, h, ld_q, Tl, c, hs);
        Rows O = chunk_view<Rows>(o, b, qi, h, ld_o, Tl, c, hs);
        for (int ki = 0; ki < 2; ++ki) {  // S = Q Kᵀ/√hs: (c,hs) @ (hs,c) -> (c,c)
          if (kind[ki] == ChunkPair::kSkip) continue;
          CRows K = chunk_view<CRows>(k, b, ki, h, ld_kv, Tl, c, hs);
          Sm.block(qi * c, ki * c, c, c).noalias() = (scale * Q) * K.transpose();
          count_flops(2L * c * c * hs);
        }
        for (int r = 0; r < c; ++r) {  // the online softmax of row i
          const int i = qi * c + r;
          float bm = -std::numeric_limits<float>::infinity();
          for (int ki = 0; ki < 2; ++ki)
            if (int n = visible_keys(kind[ki], r, c))
              bm = std::max(bm, Sm.row(i).segment(ki * c, n).maxCoeff());
          const float m_new = std::max(mr[i], bm);
          const float alpha = std::exp(mr[i] - m_new);  // 0 on the first block (m = −∞)
          float sum = 0.0f;
          for (int ki = 0; ki < 2; ++ki) {
            if (kind[ki] == ChunkPair::kSkip) continue;
            const int n = visible_keys(kind[ki], r, c);
            auto seg = Sm.row(i).segment(ki * c, n).array();
            seg = (seg - m_new).exp();  // P~ = exp(S − m')
            sum += seg.sum();
            Sm.row(i).segment(ki * c + n, c - n).setZero();  // masked inside the diagonal
          }
          lr[i] = alpha * lr[i] + sum;  // l = e^(m − m') l + rowsum P~
          O.row(r) *= alpha;            // O = e^(m − m') O ...
          mr[i] = m_new;
        }
        for (int ki = 0; ki < 2; ++ki) {  // ... + P~ V: (c,c) @ (c,hs) -> (c,hs)
          if (kind[ki] == ChunkPair::kSkip) continue;
          CRows V = chunk_view<CRows>(v, b, ki, h, ld_kv, Tl, c, hs);
          O.noalias() += Sm.block(qi * c, ki * c, c, c) * V;
          count_flops(2L * c * c * hs);
        }
      }
    }
}

void attention_block_finalize(float* o, int ld_o, float* lse, const float* m, const float* l,
                              int B, int H, int Tl, int hs) {
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const long bh = (static_cast<long>(b) * H + h) * Tl;
      Rows O(o + static_cast<long>(b) * Tl * ld_o + h * hs, Tl, hs, Stride(ld_o));
      for (int i = 0; i < Tl; ++i) {
        O.row(i) *= 1.0f / l[bh + i];                   // out = O / l
        lse[bh + i] = m[bh + i] + std::log(l[bh + i]);  // lse = m + log l
      }
    }
}

void attention_block_rowdot(float* D, const float* dout, const float* out, int ld_o, int B,
                            int H, int Tl, int hs) {
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Tl; ++i) {
        const long at = (static_cast<long>(b) * Tl + i) * ld_o + h * hs;
        float dot = 0.0f;  // D = rowsum(dO ⊙ O): the softmax backward's Σ_k P_ik dP_ik without P
        for (int e = 0; e < hs; ++e) dot += dout[at + e] * out[at + e];
        D[(static_cast<long>(b) * H + h) * Tl + i] = dot;
      }
}

void attention_block_backward(float* dq, float* dk, float* dv, int ld_dkv, float* P, float* dS,
                              const float* q, int ld_q, const float* k, const float* v,
                              int ld_kv, const float* dout, int ld_o, const float* lse,
                              const float* D, int B, int H, int Tl, int hs, BlockPairs pairs) {
  const int c = Tl / 2;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  Sq Pm(P, Tl, Tl), dSm(dS, Tl, Tl);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const long bh = (static_cast<long>(b) * H + h) * Tl;
      for (int qi = 0; qi < 2; ++qi) {
        const ChunkPair* kind = pairs.kind[qi];
        CRows Q = chunk_view<CRows>(q, b, qi, h, ld_q, Tl, c, hs);
        CRows dO = chunk_view<CRows>(dout, b, qi, h, ld_o, Tl, c, hs);
        Rows dQ = chunk_view<Rows>(dq, b, qi, h, ld_q, Tl, c, hs);
        for (int ki = 0; ki < 2; ++ki) {
          if (kind[ki] == ChunkPair::kSkip) continue;
          CRows K = chunk_view<CRows>(k, b, ki, h, ld_kv, Tl, c, hs);
          CRows V = chunk_view<CRows>(v, b, ki, h, ld_kv, Tl, c, hs);
          auto Pb = Pm.block(qi * c, ki * c, c, c);
          auto dSb = dSm.block(qi * c, ki * c, c, c);
          Pb.noalias() = (scale * Q) * K.transpose();  // S again: (c,hs) @ (hs,c) -> (c,c)
          dSb.noalias() = dO * V.transpose();          // dP = dO Vᵀ: (c,hs) @ (hs,c) -> (c,c)
          count_flops(2 * 2L * c * c * hs);
          for (int r = 0; r < c; ++r) {  // P = exp(S − lse), dS = P ⊙ (dP − D)/√hs
            const int i = qi * c + r, n = visible_keys(kind[ki], r, c);
            auto pr = Pb.row(r).head(n).array();
            pr = (pr - lse[bh + i]).exp();
            auto ds = dSb.row(r).head(n).array();
            ds = scale * pr * (ds - D[bh + i]);
            Pb.row(r).tail(c - n).setZero();
            dSb.row(r).tail(c - n).setZero();
          }
          Rows dK = chunk_view<Rows>(dk, b, ki, h, ld_dkv, Tl, c, hs);
          Rows dV = chunk_view<Rows>(dv, b, ki, h, ld_dkv, Tl, c, hs);
          dV.noalias() += Pb.transpose() * dO;  // (c,c) @ (c,hs) -> (c,hs)
          dQ.noalias() += dSb * K;              // (c,c) @ (c,hs) -> (c,hs)
          dK.noalias() += dSb.transpose() * Q;  // (c,c) @ (c,hs) -> (c,hs)
          count_flops(3 * 2L * c * c * hs);
        }
      }
    }
}

void copy_columns(float* dst, int ld_dst, const float* src, int ld_src, int64_t rows, int cols) {
  for (int64_t i = 0; i < rows; ++i)
    std::copy(src + i * ld_src, src + i * ld_src + cols, dst + i * ld_dst);
}

}  // namespace cpu
}  // namespace llmp
