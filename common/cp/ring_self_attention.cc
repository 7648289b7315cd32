// Ring self-attention (Li et al. 2021, §3.1): the two forward rings and the two backward rings of
// ring_self_attention.h, on strided Eigen maps as in kernels/cpu/attention.cc.
//
// Addresses, per sequence b and head h (row-major):
//   Q, own K, own V   (Tl,hs) in qkv (B,Tl,3A), row stride 3A, at b·Tl·3A + {0, A, 2A} + h·hs
//   chunk K_c / V_c   (Tl,hs) in a ring buffer (B,Tl,A), row stride A, at b·Tl·A + h·hs
//   block c of S, P   (Tl,Tl) in (B,H,Tl,T), row stride T, at (b·H + h)·Tl·T + c·Tl
//
// Glossary: as in the header; c the chunk a rank holds at step s, a the chunk whose accumulator
// it holds (one hop ahead of its chunk), g = r·Tl + i the global position of local row i.
#include "common/cp/ring_self_attention.h"

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "common/cp/ring_waits.h"
#include "kernels/cpu/flops.h"

namespace llmp {
namespace {
using MatR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using Map = Eigen::Map<MatR, 0, Stride>;
using CMap = Eigen::Map<const MatR, 0, Stride>;

constexpr int kTagKeys = 11, kTagValues = 12, kTagValuesBack = 13, kTagKeysBack = 14;

int mod(int a, int p) { return ((a % p) + p) % p; }

/// The shapes of one call, checked: Tl = T/p rows here, A channels, hs = A/H.
struct Dims {
  int B, T, H, A, hs, p, r, Tl;
  float scale;
  /// Chunk held at ring step s: it left its owner s steps ago, r − s (mod p).
  int chunk(int s) const { return mod(r - s, p); }
  /// Flat offset of block c of head (b,h) in an (B,H,Tl,T) score tensor.
  long block(int b, int h, int c) const { return (long(b) * H + h) * Tl * T + long(c) * Tl; }
  int64_t square() const { return int64_t(B) * H * 2 * Tl * Tl * hs; }       // Tl² products
  int64_t triangle() const { return int64_t(B) * H * Tl * (Tl + 1) * hs; }  // the diagonal block
};

Dims dims_of(const AttentionCore& core, const Tensor& qkv, int B, int T, int H) {
  const int p = core.shards(), Tl = static_cast<int>(core.positions(T).size());  // checks p | T
  const int A = qkv.ndim() == 3 ? static_cast<int>(qkv.dim(2) / 3) : 0;
  if (qkv.ndim() != 3 || qkv.dim(0) != B || qkv.dim(1) != Tl || qkv.dim(2) != 3L * A || A < 1)
    throw std::invalid_argument("ring self-attention: qkv " + qkv.describe() +
                                " is not (B,T/p,3A) = (" + std::to_string(B) + ", " +
                                std::to_string(Tl) + ", 3A)");
  if (H < 1 || A % H != 0)
    throw std::invalid_argument("ring self-attention: A=" + std::to_string(A) +
                                " channels are not divisible by H=" + std::to_string(H) + " heads");
  const int hs = A / H;
  return {B, T, H, A, hs, p, core.rank(), Tl, 1.0f / std::sqrt(static_cast<float>(hs))};
}

/// (B,Tl,A) contiguous <- channels [off, off+A) of every row of qkv (B,Tl,3A): what travels.
void pack(float* dst, const float* qkv, const Dims& d, int off) {
  for (long row = 0; row < long(d.B) * d.Tl; ++row)
    std::memcpy(dst + row * d.A, qkv + row * 3L * d.A + off, sizeof(float) * d.A);
}

/// Channels [off, off+A) of every row of dqkv (B,Tl,3A) <- src (B,Tl,A).
void unpack(float* dqkv, const float* src, const Dims& d, int off) {
  for (long row = 0; row < long(d.B) * d.Tl; ++row)
    std::memcpy(dqkv + row * 3L * d.A + off, src + row * d.A, sizeof(float) * d.A);
}

/// One ring pass of p steps over buffer `cur` (whose first B·Tl·A floats are the own chunk):
/// at step s, before(s, cur) runs, then (s < p − 1) the irecv of the next buffer from r − 1
/// and the isend of cur to r + 1 are issued, under(s, cur) runs while they fly, and both are
/// waited for. p − 1 isends of cur.nbytes(). The second buffer is a kCommBuffers scratch.
template <class Before, class Under>
void ring_pass(ProcessGroup& g, Tensor cur, int tag, const Dims& d, Before before, Under under) {
  Tensor nxt;
  if (d.p > 1) nxt = Tensor::empty(cur.shape(), DType::kF32, MemCategory::kCommBuffers);
  for (int s = 0; s < d.p; ++s) {
    before(s, cur);
    std::shared_ptr<Work> got, sent;
    if (s < d.p - 1) {
      got = g.irecv(nxt, mod(d.r - 1, d.p), tag);
      sent = g.isend(cur, mod(d.r + 1, d.p), tag);
      RingWaits::instance().issued(got, sent);  // ring_waits.h: the no-overlap comparison
    }
    under(s, cur);  // overlapped with the transfer
    if (got) {
      RingWaits::instance().wait(got);
      RingWaits::instance().wait(sent);
      std::swap(cur, nxt);
    }
  }
}
}  // namespace

std::string RingSelfAttention::split_error(int T, int H, int p) {
  (void)H;  // any number of heads
  if (T < 1 || T % p != 0)
    return "ring self-attention: T=" + std::to_string(T) + " is not divisible by p=" +
           std::to_string(p) + " (the contiguous split)";
  return "";
}

std::vector<int> RingSelfAttention::positions(int T) const {
  const int p = shards();
  if (const std::string err = split_error(T, 0, p); !err.empty()) throw std::invalid_argument(err);
  const int Tl = T / p;
  std::vector<int> pos(Tl);
  for (int j = 0; j < Tl; ++j) pos[j] = rank() * Tl + j;
  return pos;
}

void RingSelfAttention::forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                                AttentionKeep* keep) {
  const Dims d = dims_of(*this, qkv, B, T, H);
  const float* x = qkv.f32();
  const long A3 = 3L * d.A;
  if (!out.defined()) out = Tensor::empty({B, d.Tl, d.A}, DType::kF32, MemCategory::kActivations);
  if (out.numel() != long(B) * d.Tl * d.A)
    throw std::invalid_argument("ring self-attention: out " + out.describe() + " is not (B,T/p,A)");
  Tensor S = attention_scores({B, H, d.Tl, T});  // scores, then P in place: (B,H,Tl,T)
  float* s = S.f32();

  // 1. Ring of KEY chunks: S_c = (Q/√hs) K_cᵀ (Tl,hs) @ (hs,Tl) -> (Tl,Tl), for chunks c <= r.
  Tensor kbuf = Tensor::empty({B, d.Tl, d.A}, DType::kF32, MemCategory::kCommBuffers);
  pack(kbuf.f32(), x, d, d.A);
  ring_pass(group_, kbuf, kTagKeys, d, [](int, Tensor&) {}, [&](int step, Tensor& cur) {
    const int c = d.chunk(step);
    if (c > d.r) return;  // entirely in the future of every local query
    cpu::count_flops(d.square());
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        CMap Q(x + b * d.Tl * A3 + h * d.hs, d.Tl, d.hs, Stride(A3));
        CMap K(cur.f32() + long(b) * d.Tl * d.A + h * d.hs, d.Tl, d.hs, Stride(d.A));
        Map Sc(s + d.block(b, h, c), d.Tl, d.Tl, Stride(T));
        Sc.noalias() = (d.scale * Q) * K.transpose();
      }
  });

  // 2. Causal softmax of each whole row by GLOBAL position g: P[i, j] over keys j <= g.
  for (long bh = 0; bh < long(B) * H; ++bh)
    for (int i = 0; i < d.Tl; ++i) {
      const int g = d.r * d.Tl + i;
      Eigen::Map<Eigen::RowVectorXf> row(s + (bh * d.Tl + i) * T, T);
      auto live = row.head(g + 1).array();
      live = (live - live.maxCoeff()).exp();
      live *= 1.0f / live.sum();
      row.tail(T - 1 - g).setZero();  // masked: exactly 0 (and never-computed chunks c > r)
    }

  // 3. Ring of VALUE chunks: out += P_c V_c (Tl,Tl) @ (Tl,hs) -> (Tl,hs); diagonal on the triangle.
  out.fill(0.0f);
  float* y = out.f32();
  Tensor vbuf = Tensor::empty({B, d.Tl, d.A}, DType::kF32, MemCategory::kCommBuffers);
  pack(vbuf.f32(), x, d, 2 * d.A);
  ring_pass(group_, vbuf, kTagValues, d, [](int, Tensor&) {}, [&](int step, Tensor& cur) {
    const int c = d.chunk(step);
    if (c > d.r) return;
    cpu::count_flops(c < d.r ? d.square() : d.triangle());
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        CMap V(cur.f32() + long(b) * d.Tl * d.A + h * d.hs, d.Tl, d.hs, Stride(d.A));
        CMap Pc(s + d.block(b, h, c), d.Tl, d.Tl, Stride(T));
        Map Y(y + long(b) * d.Tl * d.A + h * d.hs, d.Tl, d.hs, Stride(d.A));
        if (c < d.r)
          Y.noalias() += Pc * V;
        else
          Y.noalias() += Pc.triangularView<Eigen::Lower>() * V;
      }
  });
  keep->a = S;
  keep->b = Tensor();
}

void RingSelfAttention::backward(const Tensor& dout, const Tensor& qkv, const Tensor& /*out*/,
                                 AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  const Dims d = dims_of(*this, qkv, B, T, H);
  if (dout.numel() != long(B) * d.Tl * d.A || keep->a.numel() != long(B) * H * d.Tl * T)
    throw std::invalid_argument("ring self-attention: backward got dout " + dout.describe() +
                                " and P " + keep->a.describe() + " for B=" + std::to_string(B) +
                                " T=" + std::to_string(T) + " H=" + std::to_string(H));
  if (!dqkv.defined()) dqkv = Tensor::empty(qkv.shape(), DType::kF32, MemCategory::kActivations);
  dqkv.fill(0.0f);
  const float *x = qkv.f32(), *dy = dout.f32(), *P = keep->a.f32();
  float* dx = dqkv.f32();
  const long A3 = 3L * d.A, chunk_floats = long(B) * d.Tl * d.A;
  Tensor dP = attention_scores({B, H, d.Tl, T});  // dP, then dS in place: (B,H,Tl,T)
  float* dp = dP.f32();
  auto dO = [&](int b, int h) {  // (Tl,hs) of dout, row stride A
    return CMap(dy + long(b) * d.Tl * d.A + h * d.hs, d.Tl, d.hs, Stride(d.A));
  };
  auto in_buf = [&](const Tensor& buf, long half, int b, int h) {  // half 0: chunk, 1: accumulator
    return Map(buf.f32() + half * chunk_floats + long(b) * d.Tl * d.A + h * d.hs, d.Tl, d.hs,
               Stride(d.A));
  };

  // 1. Ring of [V_c | dV accumulator of chunk a = c − 1]. Before the send: dV_a += P_aᵀ dO
  //    (Tl,Tl)ᵀ @ (Tl,hs), the accumulator's last stop (a = r at s = p − 1) lands in dqkv. Under
  //    the send: dP_c = dO V_cᵀ (Tl,hs) @ (hs,Tl) -> (Tl,Tl).
  Tensor vbuf = Tensor::zeros({2, B, d.Tl, d.A}, DType::kF32, MemCategory::kCommBuffers);
  pack(vbuf.f32(), x, d, 2 * d.A);
  ring_pass(group_, vbuf, kTagValuesBack, d,
      [&](int step, Tensor& cur) {
        const int a = mod(d.chunk(step) - 1, d.p);
        if (a <= d.r) {
          cpu::count_flops(a < d.r ? d.square() : d.triangle());
          for (int b = 0; b < B; ++b)
            for (int h = 0; h < H; ++h) {
              CMap Pa(P + d.block(b, h, a), d.Tl, d.Tl, Stride(T));
              Map dV = in_buf(cur, 1, b, h);
              if (a < d.r)
                dV.noalias() += Pa.transpose() * dO(b, h);
              else
                dV.noalias() += Pa.transpose().triangularView<Eigen::Upper>() * dO(b, h);
            }
        }
        if (step == d.p - 1) unpack(dx, cur.f32() + chunk_floats, d, 2 * d.A);  // a == r: home
      },
      [&](int step, Tensor& cur) {
        const int c = d.chunk(step);
        if (c > d.r) return;
        cpu::count_flops(d.square());
        for (int b = 0; b < B; ++b)
          for (int h = 0; h < H; ++h) {
            Map dPc(dp + d.block(b, h, c), d.Tl, d.Tl, Stride(T));
            dPc.noalias() = dO(b, h) * in_buf(cur, 0, b, h).transpose();
          }
      });

  // 2. Softmax backward on each whole row, by global position g:
  //    dS[i, j] = P[i, j]·(dP[i, j] − Σ_k P[i, k]·dP[i, k]) / √hs for j <= g, 0 beyond.
  for (long bh = 0; bh < long(B) * H; ++bh)
    for (int i = 0; i < d.Tl; ++i) {
      const int g = d.r * d.Tl + i;
      const long o = (bh * d.Tl + i) * T;
      auto p = Eigen::Map<const Eigen::RowVectorXf>(P + o, T).head(g + 1).array();
      Eigen::Map<Eigen::RowVectorXf> row(dp + o, T);
      auto ds = row.head(g + 1).array();
      const float dot = (p * ds).sum();
      ds = d.scale * p * (ds - dot);
      row.tail(T - 1 - g).setZero();
    }

  // 3. Ring of [K_c | dK accumulator of chunk a = c − 1]. Before the send: dK_a += dS_aᵀ Q
  //    (Tl,Tl)ᵀ @ (Tl,hs). Under the send: dQ += dS_c K_c (Tl,Tl) @ (Tl,hs).
  Tensor kbuf = Tensor::zeros({2, B, d.Tl, d.A}, DType::kF32, MemCategory::kCommBuffers);
  pack(kbuf.f32(), x, d, d.A);
  ring_pass(group_, kbuf, kTagKeysBack, d,
      [&](int step, Tensor& cur) {
        const int a = mod(d.chunk(step) - 1, d.p);
        if (a <= d.r) {
          cpu::count_flops(a < d.r ? d.square() : d.triangle());
          for (int b = 0; b < B; ++b)
            for (int h = 0; h < H; ++h) {
              CMap dSa(dp + d.block(b, h, a), d.Tl, d.Tl, Stride(T));
              CMap Q(x + b * d.Tl * A3 + h * d.hs, d.Tl, d.hs, Stride(A3));
              Map dK = in_buf(cur, 1, b, h);
              if (a < d.r)
                dK.noalias() += dSa.transpose() * Q;
              else
                dK.noalias() += dSa.transpose().triangularView<Eigen::Upper>() * Q;
            }
        }
        if (step == d.p - 1) unpack(dx, cur.f32() + chunk_floats, d, d.A);  // a == r: home
      },
      [&](int step, Tensor& cur) {
        const int c = d.chunk(step);
        if (c > d.r) return;
        cpu::count_flops(c < d.r ? d.square() : d.triangle());
        for (int b = 0; b < B; ++b)
          for (int h = 0; h < H; ++h) {
            CMap dSc(dp + d.block(b, h, c), d.Tl, d.Tl, Stride(T));
            Map dQ(dx + b * d.Tl * A3 + h * d.hs, d.Tl, d.hs, Stride(A3));
            if (c < d.r)
              dQ.noalias() += dSc * in_buf(cur, 0, b, h);
            else
              dQ.noalias() += dSc.triangularView<Eigen::Lower>() * in_buf(cur, 0, b, h);
          }
      });
  keep->a = Tensor();
  keep->b = Tensor();
}

// ---- Closed forms (derived in stages/ring_self_attention/README.md) ----

double RingSelfAttention::bytes_per_block(int B, int T, int A, int /*H*/) const {
  const double Tl = positions(T).size(), p = shards();
  return 6.0 * (p - 1) * 4.0 * B * Tl * A;  // fwd 2(p−1)·4B·Tl·A + bwd 2(p−1)·8B·Tl·A
}

double RingSelfAttention::kept_bytes_per_block(int B, int T, int /*A*/, int H) const {
  return 4.0 * B * H * double(positions(T).size()) * T;  // P (B,H,Tl,T) f32
}

double RingSelfAttention::peak_score_bytes(int B, int T, int A, int H, int L) const {
  return (L + 1) * kept_bytes_per_block(B, T, A, H);  // L kept P + the last backward's dP
}

double RingSelfAttention::forward_flops_per_block(int B, int T, int A, int H) const {
  const double Tl = positions(T).size(), r = rank(), hs = double(A) / H;
  return double(B) * H * hs * (2 * (r + 1) * Tl * Tl + 2 * r * Tl * Tl + Tl * (Tl + 1));
}

}  // namespace llmp
