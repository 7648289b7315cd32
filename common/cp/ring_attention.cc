// RingAttention (ring_attention.h): the ring of key/value blocks, the online softmax per block,
// and the backward with each block's dK|dV accumulator travelling behind it.
//
// Layouts (row-major f32): qkv (B,Tl,3A) q|k|v; a ring block kv (B,Tl,2A) k|v of its owner's
// rows; an accumulator (B,Tl,2A) dk|dv; m, l, lse, D (B,H,Tl). Head h of (b) is the (Tl,hs)
// strided view at channel h·hs; chunk j (0 or 1) of a view is its rows [j·c, (j+1)·c).
//
// Glossary: as ring_attention.h; qi / ki the local query / key chunk (0 or 1), o the row within
// a chunk, src the rank that owns the block being computed with.
#include "common/cp/ring_attention.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/cp/ring_waits.h"
#include "kernels/cpu/flops.h"

namespace llmp {

struct RingAttention::Dims {
  int B, T, H, Tl, c, A, hs;
};

namespace {
using MatR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using Rows = Eigen::Map<MatR, 0, Stride>;  // (c,hs) rows of one head in a wider buffer
using CRows = Eigen::Map<const MatR, 0, Stride>;
using Sq = Eigen::Map<MatR>;  // (Tl,Tl) score block

constexpr int kKvTag = 0, kAccTag = 1;  // K|V blocks and dK|dV accumulators: separate streams

/// How a (query chunk, key chunk) pair of global chunk indices is computed.
enum class Pair { kSkip, kDiagonal, kFull };
Pair pair_kind(int q_chunk, int k_chunk) {
  return k_chunk > q_chunk ? Pair::kSkip : k_chunk == q_chunk ? Pair::kDiagonal : Pair::kFull;
}
/// Keys of the pair that row o of the query chunk sees: none, o + 1 (the causal diagonal), all c.
int visible(Pair k, int o, int c) { return k == Pair::kSkip ? 0 : k == Pair::kDiagonal ? o + 1 : c; }

/// (c,hs) view of chunk j, head h, sequence b of a (B,Tl,width) buffer, at channel offset `at`.
template <typename M, typename P>
M chunk_view(P* base, int b, int j, int h, int at, int width,
             int Tl, int c, int hs) {
  return M(base + (static_cast<long>(b) * Tl + static_cast<long>(j) * c) * width + at + h * hs, c,
           hs, Stride(width));
}
}  // namespace

RingAttention::RingAttention(ProcessGroup& group, Split split)
    : group_(group), split_(split), p_(group.size()), r_(group.rank()) {}

std::array<int, 2> RingAttention::chunks(int r) const {
  if (split_ == Split::kBalanced) return {r, 2 * p_ - 1 - r};  // Megatron-Core's causal balance
  return {2 * r, 2 * r + 1};                                   // positions [r·T/p, (r+1)·T/p)
}

std::string RingAttention::split_error(int T, int H, int p) {
  (void)H;  // any number of heads: each head is attended to on every rank
  if (T <= 0 || T % (2 * p) != 0)
    return "ring attention: T=" + std::to_string(T) + " is not divisible by 2p=" +
           std::to_string(2 * p) + " (chunks of the causal split)";
  return "";
}

std::vector<int> RingAttention::positions(int T) const {
  if (const std::string err = split_error(T, 0, p_); !err.empty()) throw std::invalid_argument(err);
  const int c = T / (2 * p_);
  std::vector<int> pos;
  for (int chunk : chunks(r_))
    for (int o = 0; o < c; ++o) pos.push_back(chunk * c + o);
  return pos;
}

RingAttention::Dims RingAttention::dims(const Tensor& qkv, int B, int T, int H,
                                        const char* where) const {
  positions(T);  // 2p | T, or the one-line error
  const int Tl = T / p_;
  if (B <= 0 || H <= 0 || qkv.ndim() != 3 || qkv.dim(0) != B || qkv.dim(1) != Tl ||
      qkv.dim(2) % (3L * H) != 0)
    throw std::invalid_argument(std::string("ring attention ") + where + ": qkv " +
                                qkv.describe() + " is not (B=" + std::to_string(B) + ", T/p=" +
                                std::to_string(Tl) + ", 3A) with H=" + std::to_string(H) +
                                " dividing A");
  const int A = static_cast<int>(qkv.dim(2) / 3);
  return Dims{B, T, H, Tl, Tl / 2, A, A / H};
}

namespace {
void check_numel(const Tensor& t, int64_t n, const char* what) {
  if (!t.defined() || t.numel() != n)
    throw std::invalid_argument(std::string("ring attention: ") + what + " " + t.describe() +
                                " should have " + std::to_string(n) + " elements");
}

/// kv (B,Tl,2A) = the k|v columns of qkv (B,Tl,3A): this rank's block, as it travels.
void pack_kv(float* kv, const float* qkv, long rows, int A) {
  for (long i = 0; i < rows; ++i)
    std::copy(qkv + i * 3 * A + A, qkv + i * 3 * A + 3 * A, kv + i * 2 * A);
}
}  // namespace

// ---- forward ----

void RingAttention::forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                            AttentionKeep* keep) {
  const Dims d = dims(qkv, B, T, H, "forward");
  check_numel(out, static_cast<int64_t>(B) * d.Tl * d.A, "out");
  const int c = d.c, hs = d.hs, A = d.A, Tl = d.Tl;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int next = (r_ + 1) % p_, prev = (r_ + p_ - 1) % p_;
  const std::array<int, 2> mine = chunks(r_);

  Tensor kv[2] = {Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kCommBuffers),
                  Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kCommBuffers)};
  pack_kv(kv[0].f32(), qkv.f32(), static_cast<long>(B) * Tl, A);
  Tensor m = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations);
  Tensor l = Tensor::zeros({B, H, Tl}, DType::kF32, MemCategory::kActivations);
  m.fill(-std::numeric_limits<float>::infinity());
  out.fill(0.0f);                      // O, the unnormalised output, until the end
  Tensor S = attention_scores({Tl, Tl});  // the one score block, reused for P~
  Sq Sm(S.f32(), Tl, Tl);

  for (int s = 0; s < p_; ++s) {  // step s computes with the block of rank src = r − s
    const int src = (r_ - s + p_) % p_;
    std::shared_ptr<Work> recv_next, send_this;
    if (s + 1 < p_) {  // pass this block on while computing with it (p − 1 sends)
      recv_next = group_.irecv(kv[(s + 1) % 2], prev, kKvTag);
      send_this = group_.isend(kv[s % 2], next, kKvTag);
      RingWaits::instance().issued(recv_next, send_this);  // ring_waits.h: no-overlap comparison
    }
    const std::array<int, 2> theirs = chunks(src);
    const float* blk = kv[s % 2].f32();
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        float* mr = m.f32() + (static_cast<long>(b) * H + h) * Tl;
        float* lr = l.f32() + (static_cast<long>(b) * H + h) * Tl;
        for (int qi = 0; qi < 2; ++qi) {
          const Pair kind[2] = {pair_kind(mine[qi], theirs[0]), pair_kind(mine[qi], theirs[1])};
          if (kind[0] == Pair::kSkip && kind[1] == Pair::kSkip) continue;
          CRows Q = chunk_view<CRows>(qkv.f32(), b, qi, h, 0, 3 * A, Tl, c, hs);
          Rows O = chunk_view<Rows>(out.f32(), b, qi, h, 0, A, Tl, c, hs);
          for (int ki = 0; ki < 2; ++ki) {  // S = Q Kᵀ/√hs: (c,hs) @ (hs,c) -> (c,c)
            if (kind[ki] == Pair::kSkip) continue;
            CRows K = chunk_view<CRows>(blk, b, ki, h, 0, 2 * A, Tl, c, hs);
            Sm.block(qi * c, ki * c, c, c).noalias() = (scale * Q) * K.transpose();
            cpu::count_flops(2L * c * c * hs);
          }
          for (int o = 0; o < c; ++o) {  // the online softmax of row i
            const int i = qi * c + o;
            float bm = -std::numeric_limits<float>::infinity();
            for (int ki = 0; ki < 2; ++ki)
              if (int n = visible(kind[ki], o, c))
                bm = std::max(bm, Sm.row(i).segment(ki * c, n).maxCoeff());
            const float m_new = std::max(mr[i], bm);
            const float alpha = std::exp(mr[i] - m_new);  // 0 on the first block (m = −∞)
            float sum = 0.0f;
            for (int ki = 0; ki < 2; ++ki) {
              if (kind[ki] == Pair::kSkip) continue;
              const int n = visible(kind[ki], o, c);
              auto seg = Sm.row(i).segment(ki * c, n).array();
              seg = (seg - m_new).exp();  // P~ = exp(S − m')
              sum += seg.sum();
              Sm.row(i).segment(ki * c + n, c - n).setZero();  // masked inside the diagonal
            }
            lr[i] = alpha * lr[i] + sum;  // l = e^(m − m') l + rowsum P~
            O.row(o) *= alpha;            // O = e^(m − m') O ...
            mr[i] = m_new;
          }
          for (int ki = 0; ki < 2; ++ki) {  // ... + P~ V: (c,c) @ (c,hs) -> (c,hs)
            if (kind[ki] == Pair::kSkip) continue;
            CRows V = chunk_view<CRows>(blk, b, ki, h, A, 2 * A, Tl, c, hs);
            O.noalias() += Sm.block(qi * c, ki * c, c, c) * V;
            cpu::count_flops(2L * c * c * hs);
          }
        }
      }
    if (recv_next) {
      RingWaits::instance().wait(recv_next);
      RingWaits::instance().wait(send_this);
    }
  }

  // out = O / l; lse = m + log l, the one row statistic the backward needs.
  keep->a = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations);
  keep->b = Tensor();
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const long bh = (static_cast<long>(b) * H + h) * Tl;
      Rows O(out.f32() + static_cast<long>(b) * Tl * A + h * hs, Tl, hs, Stride(A));
      for (int i = 0; i < Tl; ++i) {
        O.row(i) *= 1.0f / l.f32()[bh + i];
        keep->a.f32()[bh + i] = m.f32()[bh + i] + std::log(l.f32()[bh + i]);
      }
    }
}

// ---- backward ----

void RingAttention::backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                             AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  const Dims d = dims(qkv, B, T, H, "backward");
  const int c = d.c, hs = d.hs, A = d.A, Tl = d.Tl;
  const long rows = static_cast<long>(B) * Tl;
  check_numel(dout, rows * A, "dout");
  check_numel(out, rows * A, "out");
  check_numel(dqkv, rows * 3 * A, "dqkv");
  check_numel(keep->a, static_cast<int64_t>(B) * H * Tl, "keep->a (lse)");
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int next = (r_ + 1) % p_, prev = (r_ + p_ - 1) % p_;
  const std::array<int, 2> mine = chunks(r_);
  const float* lse = keep->a.f32();

  // D = rowsum(dO ⊙ O) per (b, h, row): the softmax backward's Σ_k P_ik dP_ik without P.
  Tensor D = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Tl; ++i) {
        const long at = (static_cast<long>(b) * Tl + i) * A + h * hs;
        float dot = 0.0f;
        for (int e = 0; e < hs; ++e) dot += dout.f32()[at + e] * out.f32()[at + e];
        D.f32()[(static_cast<long>(b) * H + h) * Tl + i] = dot;
      }

  auto comm = [&] { return Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kCommBuffers); };
  Tensor kv[2] = {comm(), comm()}, acc[2] = {comm(), comm()};
  pack_kv(kv[0].f32(), qkv.f32(), rows, A);
  Tensor contrib = Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kActivations);
  Tensor P = attention_scores({Tl, Tl}), dS = attention_scores({Tl, Tl});
  Sq Pm(P.f32(), Tl, Tl), dSm(dS.f32(), Tl, Tl);
  dqkv.fill(0.0f);  // dQ accumulates over the blocks; dK|dV come home at the end
  std::shared_ptr<Work> acc_sent[2];

  for (int s = 0; s < p_; ++s) {
    const int src = (r_ - s + p_) % p_;
    std::shared_ptr<Work> recv_next, send_this, acc_recv;
    if (s + 1 < p_) {
      recv_next = group_.irecv(kv[(s + 1) % 2], prev, kKvTag);
      send_this = group_.isend(kv[s % 2], next, kKvTag);
      RingWaits::instance().issued(recv_next, send_this);  // ring_waits.h: no-overlap comparison
    }
    Tensor& a = acc[s % 2];  // block src's accumulator: from rank r − 1, which held it at s − 1
    if (s > 0) {
      RingWaits::instance().wait(acc_sent[s % 2]);  // its previous content has left
      acc_recv = group_.irecv(a, prev, kAccTag);
      RingWaits::instance().issued(acc_recv);
    }
    const std::array<int, 2> theirs = chunks(src);
    const float* blk = kv[s % 2].f32();
    contrib.fill(0.0f);  // this rank's dK|dV contribution to block src
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        const long bh = (static_cast<long>(b) * H + h) * Tl;
        for (int qi = 0; qi < 2; ++qi) {
          const Pair kind[2] = {pair_kind(mine[qi], theirs[0]), pair_kind(mine[qi], theirs[1])};
          CRows Q = chunk_view<CRows>(qkv.f32(), b, qi, h, 0, 3 * A, Tl, c, hs);
          CRows dO = chunk_view<CRows>(dout.f32(), b, qi, h, 0, A, Tl, c, hs);
          Rows dQ = chunk_view<Rows>(dqkv.f32(), b, qi, h, 0, 3 * A, Tl, c, hs);
          for (int ki = 0; ki < 2; ++ki) {
            if (kind[ki] == Pair::kSkip) continue;
            CRows K = chunk_view<CRows>(blk, b, ki, h, 0, 2 * A, Tl, c, hs);
            CRows V = chunk_view<CRows>(blk, b, ki, h, A, 2 * A, Tl, c, hs);
            auto Pb = Pm.block(qi * c, ki * c, c, c);
            auto dSb = dSm.block(qi * c, ki * c, c, c);
            Pb.noalias() = (scale * Q) * K.transpose();  // S again: (c,hs) @ (hs,c) -> (c,c)
            dSb.noalias() = dO * V.transpose();          // dP = dO Vᵀ: (c,hs) @ (hs,c) -> (c,c)
            cpu::count_flops(2 * 2L * c * c * hs);
            for (int o = 0; o < c; ++o) {  // P = exp(S − lse), dS = P ⊙ (dP − D)/√hs
              const int i = qi * c + o, n = visible(kind[ki], o, c);
              auto pr = Pb.row(o).head(n).array();
              pr = (pr - lse[bh + i]).exp();
              auto ds = dSb.row(o).head(n).array();
              ds = scale * pr * (ds - D.f32()[bh + i]);
              Pb.row(o).tail(c - n).setZero();
              dSb.row(o).tail(c - n).setZero();
            }
            Rows dK = chunk_view<Rows>(contrib.f32(), b, ki, h, 0, 2 * A, Tl, c, hs);
            Rows dV = chunk_view<Rows>(contrib.f32(), b, ki, h, A, 2 * A, Tl, c, hs);
            dV.noalias() += Pb.transpose() * dO;  // (c,c) @ (c,hs) -> (c,hs)
            dQ.noalias() += dSb * K;              // (c,c) @ (c,hs) -> (c,hs)
            dK.noalias() += dSb.transpose() * Q;  // (c,c) @ (c,hs) -> (c,hs)
            cpu::count_flops(3 * 2L * c * c * hs);
          }
        }
      }
    if (s == 0) {
      a.copy_from(contrib);  // this rank's own block: its first visitor
    } else {
      RingWaits::instance().wait(acc_recv);
      float* ap = a.f32();
      const float* mp = contrib.f32();
      for (long e = 0; e < a.numel(); ++e) ap[e] += mp[e];
    }
    if (p_ > 1) acc_sent[s % 2] = group_.isend(a, next, kAccTag);  // s = p − 1: home, to r + 1
    if (recv_next) {
      RingWaits::instance().wait(recv_next);
      RingWaits::instance().wait(send_this);
    }
  }

  // This rank's own dK|dV, complete, from its last visitor r − 1 (= r + p − 1).
  Tensor& home = p_ > 1 ? acc[p_ % 2] : acc[0];
  if (p_ > 1) {
    RingWaits::instance().wait(acc_sent[p_ % 2]);
    RingWaits::instance().wait(group_.irecv(home, prev, kAccTag));
  }
  for (long i = 0; i < rows; ++i)
    std::copy(home.f32() + i * 2 * A, home.f32() + (i + 1) * 2 * A, dqkv.f32() + i * 3 * A + A);
  for (auto& w : acc_sent) RingWaits::instance().wait(w);
  keep->a = Tensor();
  keep->b = Tensor();
}

// ---- closed forms (stages/ring_attention/README.md derives each) ----

double RingAttention::bytes_per_block(int B, int T, int A, int /*H*/) const {
  if (p_ == 1) return 0.0;
  return (3.0 * p_ - 2) * 8.0 * B * (static_cast<double>(T) / p_) * A;
}
std::string RingAttention::bytes_formula_text() const { return "(3p-2)·8BTA/p"; }
int RingAttention::calls_per_block() const { return p_ == 1 ? 0 : 3 * p_ - 2; }
double RingAttention::kept_bytes_per_block(int B, int T, int /*A*/, int H) const {
  return 4.0 * B * H * (static_cast<double>(T) / p_);
}
double RingAttention::peak_score_bytes(int, int T, int, int, int) const {
  const double Tl = static_cast<double>(T) / p_;
  return 8.0 * Tl * Tl;
}
std::string RingAttention::peak_score_formula_text() const { return "8(T/p)²"; }
double RingAttention::forward_flops_per_block(int B, int T, int A, int /*H*/) const {
  const double c = static_cast<double>(T) / (2 * p_);
  const int pairs = split_ == Split::kBalanced ? 2 * p_ + 1 : 4 * r_ + 3;
  return 4.0 * B * c * c * A * pairs;  // B·H pairs·(2c²hs Q Kᵀ + 2c²hs P V), H·hs = A
}

}  // namespace llmp
