// Ring self-attention (Li et al. 2021, §3.1): the two forward rings and the two backward rings of
// ring_self_attention.h, through kernel_ops(qkv.device()) (kernels/cpu/ring_self_block.h and its
// CUDA twin): every buffer is on qkv's device, no host code touches its data.
//
// Addresses, per sequence b, batched over the H heads (head stride hs along the channels):
//   Q, own K, own V   (Tl,hs) in qkv (B,Tl,3A), row stride 3A, at b·Tl·3A + {0, A, 2A} + h·hs
//   chunk K_c / V_c   (Tl,hs) in a ring buffer (B,Tl,A), row stride A, at b·Tl·A + h·hs
//   block c of S, P   (Tl,Tl) in (B,H,Tl,T), row stride T, at (b·H + h)·Tl·T + c·Tl
//                     (head stride Tl·T)
// Every product is one gemm_strided_batched call per sequence b, batch = H. The diagonal block
// c = r is multiplied on the full square like the others: P and dS are exactly 0 above its
// diagonal, so the results are the triangle's numbers (ring_self_block.h says why).
//
// Glossary: as in the header; c the chunk a rank holds at step s, a the chunk whose accumulator
// it holds (one hop ahead of its chunk), g = r·Tl + i the global position of local row i.
#include "common/cp/ring_self_attention.h"

#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/cp/f32_copies.h"
#include "common/cp/ring_waits.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

constexpr int kTagKeys = 11, kTagValues = 12, kTagValuesBack = 13, kTagKeysBack = 14;

int mod(int a, int p) { return ((a % p) + p) % p; }

/// The shapes of one call, checked: Tl = T/p rows here, A channels, hs = A/H.
struct Dims {
  int B, T, H, A, hs, p, r, Tl;
  float scale;
  /// Chunk held at ring step s: it left its owner s steps ago, r − s (mod p).
  int chunk(int s) const { return mod(r - s, p); }
  /// Flat offset of block c of head (b, 0) in an (B,H,Tl,T) score tensor (head stride Tl·T).
  long block(int b, int c) const { return long(b) * H * Tl * T + long(c) * Tl; }
  long head_block() const { return long(Tl) * T; }
  /// Flat offset of sequence b's rows in a (B,Tl,w) buffer.
  long seq(int b, int w) const { return long(b) * Tl * w; }
  long rows() const { return long(B) * Tl; }
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

/// `t` has n elements of `dt` and lives on `dev`, or a one-line std::invalid_argument naming it.
void check_tensor(const Tensor& t, long n, Device dev, DType dt, const char* what) {
  if (!t.defined() || t.numel() != n)
    throw std::invalid_argument(std::string("ring self-attention: ") + what + " " + t.describe() +
                                " should have " + std::to_string(n) + " elements");
  if (t.device() != dev || t.dtype() != dt)
    throw std::invalid_argument(std::string("ring self-attention: ") + what + " " +
                                t.describe() + " is not " + to_string(dt) + " on " +
                                to_string(dev) + " with qkv");
}

/// One ring message: a chunk of K or V (B,Tl,A) in the activations' dtype and, in the backward,
/// the fp32 accumulator (B,Tl,A) of the chunk one hop behind it. In fp32 the two are one
/// (2,B,Tl,A) buffer sent as one message (Li et al.'s ring); with a 16-bit chunk they are two
/// messages (the accumulator stays fp32: every hop adds to it). The kernels read the chunk as
/// fp32: itself, or widened into `scratch` (exact: its values are 16-bit numbers).
struct RingMsg {
  std::vector<Tensor> parts;  // [chunk | acc] (fp32), or chunk (16-bit) then acc (fp32)
  Tensor scratch;             // the widened chunk (16-bit only)
  int64_t chunk_floats = 0;

  /// A message on `dev` for chunks of `dt`, with an accumulator when `acc`; zeroed.
  RingMsg(int B, int Tl, int A, DType dt, bool acc, Device dev)
      : chunk_floats(int64_t{B} * Tl * A) {
    if (dt == DType::kF32) {
      parts.push_back(
          Tensor::zeros({acc ? 2 : 1, B, Tl, A}, DType::kF32, MemCategory::kCommBuffers, dev));
    } else {
      parts.push_back(Tensor::zeros({B, Tl, A}, dt, MemCategory::kCommBuffers, dev));
      if (acc)
        parts.push_back(Tensor::zeros({B, Tl, A}, DType::kF32, MemCategory::kCommBuffers, dev));
      scratch = Tensor::empty({B, Tl, A}, DType::kF32, MemCategory::kOther, dev);
    }
  }
  /// Writes this rank's own chunk: columns [c0, c0 + A) of the fp32 q|k|v x (rows of 3A floats),
  /// rounded into a 16-bit chunk.
  void pack(KernelOps& ops, const float* x, int64_t rows, int A) {
    float* dst = scratch.defined() ? scratch.f32() : parts[0].f32();
    ops.copy_columns(dst, A, x, 3 * A, rows, A);
    if (scratch.defined()) ops.round_to(dst, parts[0].raw(), parts[0].dtype(), chunk_floats);
  }
  /// The chunk as fp32 floats for a kernel.
  const float* chunk(KernelOps& ops) {
    if (!scratch.defined()) return parts[0].f32();
    ops.widen(parts[0].raw(), parts[0].dtype(), scratch.f32(), chunk_floats);
    return scratch.f32();
  }
  /// The accumulator riding with the chunk (backward messages only).
  float* acc() { return parts.size() == 1 ? parts[0].f32() + chunk_floats : parts[1].f32(); }
};

/// One ring pass of p steps over message `cur` (holding the own chunk): at step s, before(s, cur)
/// runs, then (s < p − 1) the irecv of the next message from r − 1 and the isend of cur to r + 1
/// are issued (one per part, tag + part), under(s, cur) runs while they fly, and all are waited
/// for. p − 1 isends of each part. `nxt` is the second message, of cur's shapes.
template <class Before, class Under>
void ring_pass(ProcessGroup& g, RingMsg& cur, RingMsg& nxt, int tag, const Dims& d, Before before,
               Under under) {
  RingMsg* a = &cur;
  RingMsg* b = &nxt;
  for (int s = 0; s < d.p; ++s) {
    before(s, *a);
    std::vector<std::shared_ptr<Work>> got, sent;
    if (s < d.p - 1)
      for (size_t i = 0; i < a->parts.size(); ++i) {
        got.push_back(g.irecv(b->parts[i], mod(d.r - 1, d.p), tag + 100 * int(i)));
        sent.push_back(g.isend(a->parts[i], mod(d.r + 1, d.p), tag + 100 * int(i)));
        RingWaits::instance().issued(got.back(), sent.back());  // ring_waits.h: no-overlap
      }
    under(s, *a);  // overlapped with the transfer
    for (size_t i = 0; i < got.size(); ++i) {
      RingWaits::instance().wait(got[i]);
      RingWaits::instance().wait(sent[i]);
    }
    if (!got.empty()) std::swap(a, b);
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
  const Device dev = qkv.device();
  const DType dt = qkv.dtype();  // f32, or 16-bit as stored: the chunks travel in it
  KernelOps& ops = kernel_ops(dev);
  const Tensor x32 = as_f32(qkv);  // the products' fp32 q|k|v (qkv itself in fp32)
  const float* x = x32.f32();
  const int A = d.A, A3 = 3 * d.A, Tl = d.Tl, hs = d.hs;
  if (!out.defined()) out = Tensor::empty({B, Tl, A}, dt, MemCategory::kActivations, dev);
  check_tensor(out, d.rows() * A, dev, dt, "out");
  Tensor S = attention_scores({B, H, Tl, T}, DType::kF32, dev);  // scores, then P in place
  float* s = S.f32();
  RingMsg cur(B, Tl, A, dt, /*acc=*/false, dev), nxt(B, Tl, A, dt, false, dev);

  // 1. Ring of KEY chunks: S_c = (Q/√hs) K_cᵀ (Tl,hs) @ (hs,Tl) -> (Tl,Tl), for chunks c <= r.
  cur.pack(ops, x + A, d.rows(), A);  // this rank's K: (B,Tl,A)
  ring_pass(group_, cur, nxt, kTagKeys, d, [](int, RingMsg&) {}, [&](int step, RingMsg& m) {
    const int c = d.chunk(step);
    if (c > d.r) return;  // entirely in the future of every local query
    const float* k = m.chunk(ops);
    for (int b = 0; b < B; ++b)
      ops.gemm_strided_batched(false, true, Tl, Tl, hs, d.scale, x + d.seq(b, A3), A3, hs,
                               k + d.seq(b, A), A, hs, 0.0f, s + d.block(b, c), T,
                               d.head_block(), H);
  });

  // 2. Causal softmax of each whole row by GLOBAL position g = r·Tl + i: P[i, j] over keys
  //    j <= g, the tail exactly 0 (the never-computed chunks c > r included).
  ops.causal_softmax_rows(s, long(B) * H * Tl, Tl, T, d.r * Tl);

  // 3. Ring of VALUE chunks: out += P_c V_c (Tl,Tl) @ (Tl,hs) -> (Tl,hs), for c <= r, summed in
  //    fp32 (a 16-bit out is rounded once at the end).
  Tensor o = f32_result(out);
  o.fill(0.0f);
  float* y = o.f32();
  cur.pack(ops, x + 2 * A, d.rows(), A);  // this rank's V
  ring_pass(group_, cur, nxt, kTagValues, d, [](int, RingMsg&) {}, [&](int step, RingMsg& m) {
    const int c = d.chunk(step);
    if (c > d.r) return;
    const float* v = m.chunk(ops);
    for (int b = 0; b < B; ++b)
      ops.gemm_strided_batched(false, false, Tl, hs, Tl, 1.0f, s + d.block(b, c), T,
                               d.head_block(), v + d.seq(b, A), A, hs, 1.0f, y + d.seq(b, A), A,
                               hs, H);
  });
  round_into(out, o);
  keep->a = S;
  keep->b = Tensor();
}

void RingSelfAttention::backward(const Tensor& dout, const Tensor& qkv, const Tensor& /*out*/,
                                 AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  const Dims d = dims_of(*this, qkv, B, T, H);
  const Device dev = qkv.device();
  const DType dt = qkv.dtype();
  if (dout.numel() != d.rows() * d.A || keep->a.numel() != long(B) * H * d.Tl * T)
    throw std::invalid_argument("ring self-attention: backward got dout " + dout.describe() +
                                " and P " + keep->a.describe() + " for B=" + std::to_string(B) +
                                " T=" + std::to_string(T) + " H=" + std::to_string(H));
  check_tensor(dout, d.rows() * d.A, dev, dt, "dout");
  check_tensor(keep->a, long(B) * H * d.Tl * T, dev, DType::kF32, "keep->a (P)");
  if (!dqkv.defined()) dqkv = Tensor::empty(qkv.shape(), dt, MemCategory::kActivations, dev);
  check_tensor(dqkv, qkv.numel(), dev, dt, "dqkv");
  KernelOps& ops = kernel_ops(dev);
  // The products' fp32 operands (the tensors themselves in fp32) and the fp32 dq|dk|dv.
  const Tensor x32 = as_f32(qkv), dy32 = as_f32(dout);
  Tensor dx32 = f32_result(dqkv);
  dx32.fill(0.0f);
  const float *x = x32.f32(), *dy = dy32.f32(), *P = keep->a.f32();
  float* dx = dx32.f32();
  const int A = d.A, A3 = 3 * d.A, Tl = d.Tl, hs = d.hs;
  Tensor dP = attention_scores({B, H, Tl, T}, DType::kF32, dev);  // dP, then dS in place
  float* dp = dP.f32();

  // 1. Ring of [V_c | dV accumulator of chunk a = c − 1]. Before the send: dV_a += P_aᵀ dO
  //    (Tl,Tl)ᵀ @ (Tl,hs), the accumulator's last stop (a = r at s = p − 1) lands in dqkv. Under
  //    the send: dP_c = dO V_cᵀ (Tl,hs) @ (hs,Tl) -> (Tl,Tl).
  {
    RingMsg cur(B, Tl, A, dt, /*acc=*/true, dev), nxt(B, Tl, A, dt, true, dev);  // zeroed
    cur.pack(ops, x + 2 * A, d.rows(), A);
    ring_pass(group_, cur, nxt, kTagValuesBack, d,
        [&](int step, RingMsg& m) {
          const int a = mod(d.chunk(step) - 1, d.p);
          float* acc = m.acc();
          if (a <= d.r)
            for (int b = 0; b < B; ++b)
              ops.gemm_strided_batched(true, false, Tl, hs, Tl, 1.0f, P + d.block(b, a), T,
                                       d.head_block(), dy + d.seq(b, A), A, hs, 1.0f,
                                       acc + d.seq(b, A), A, hs, H);
          if (step == d.p - 1) ops.copy_columns(dx + 2 * A, A3, acc, A, d.rows(), A);  // home
        },
        [&](int step, RingMsg& m) {
          const int c = d.chunk(step);
          if (c > d.r) return;
          const float* v = m.chunk(ops);
          for (int b = 0; b < B; ++b)
            ops.gemm_strided_batched(false, true, Tl, Tl, hs, 1.0f, dy + d.seq(b, A), A, hs,
                                     v + d.seq(b, A), A, hs, 0.0f, dp + d.block(b, c), T,
                                     d.head_block(), H);
        });
  }  // the V ring's buffers freed before the K ring's

  // 2. Softmax backward on each whole row, by global position g:
  //    dS[i, j] = P[i, j]·(dP[i, j] − Σ_k P[i, k]·dP[i, k]) / √hs for j <= g, 0 beyond.
  ops.causal_softmax_rows_backward(dp, P, long(B) * H * Tl, Tl, T, d.r * Tl, d.scale);

  // 3. Ring of [K_c | dK accumulator of chunk a = c − 1]. Before the send: dK_a += dS_aᵀ Q
  //    (Tl,Tl)ᵀ @ (Tl,hs). Under the send: dQ += dS_c K_c (Tl,Tl) @ (Tl,hs).
  RingMsg kcur(B, Tl, A, dt, /*acc=*/true, dev), knxt(B, Tl, A, dt, true, dev);  // zeroed
  kcur.pack(ops, x + A, d.rows(), A);
  ring_pass(group_, kcur, knxt, kTagKeysBack, d,
      [&](int step, RingMsg& m) {
        const int a = mod(d.chunk(step) - 1, d.p);
        float* acc = m.acc();
        if (a <= d.r)
          for (int b = 0; b < B; ++b)
            ops.gemm_strided_batched(true, false, Tl, hs, Tl, 1.0f, dp + d.block(b, a), T,
                                     d.head_block(), x + d.seq(b, A3), A3, hs, 1.0f,
                                     acc + d.seq(b, A), A, hs, H);
        if (step == d.p - 1) ops.copy_columns(dx + A, A3, acc, A, d.rows(), A);  // home
      },
      [&](int step, RingMsg& m) {
        const int c = d.chunk(step);
        if (c > d.r) return;
        const float* k = m.chunk(ops);
        for (int b = 0; b < B; ++b)
          ops.gemm_strided_batched(false, false, Tl, hs, Tl, 1.0f, dp + d.block(b, c), T,
                                   d.head_block(), k + d.seq(b, A), A, hs, 1.0f,
                                   dx + d.seq(b, A3), A3, hs, H);
      });
  round_into(dqkv, dx32);
  keep->a = Tensor();
  keep->b = Tensor();
}

// ---- Closed forms (derived in stages/ring_self_attention/README.md) ----

double RingSelfAttention::bytes_per_block(int B, int T, int A, int /*H*/) const {
  // fwd 2(p−1) chunks of e·B·Tl·A; bwd 2(p−1) chunks with their fp32 accumulators, (e + 4)·B·Tl·A:
  // fp32 (e = 4) 6(p−1)·4·B·Tl·A, 16-bit (e = 2) 4(p−1)·4·B·Tl·A.
  const double Tl = positions(T).size(), p = shards(), e = stored_bytes();
  return (p - 1) * (2 * e + 2 * (e + 4)) * B * Tl * A;
}

double RingSelfAttention::forward_bytes_per_block(int B, int T, int A, int /*H*/) const {
  const double Tl = positions(T).size(), p = shards();
  return 2 * (p - 1) * stored_bytes() * B * Tl * A;
}

std::string RingSelfAttention::bytes_formula_text() const {
  return stored_bytes() == 4 ? "6(p-1)·4·B·T·A/p" : "4(p-1)·4·B·T·A/p";
}

int RingSelfAttention::calls_per_block() const {
  const int p = group_.size();
  return (stored_bytes() == 4 ? 4 : 6) * (p - 1);  // 16-bit: chunk and accumulator apart
}

double RingSelfAttention::kept_bytes_per_block(int B, int T, int /*A*/, int H) const {
  return 4.0 * B * H * double(positions(T).size()) * T;  // P (B,H,Tl,T) f32
}

double RingSelfAttention::peak_score_bytes(int B, int T, int A, int H, int L) const {
  return (L + 1) * kept_bytes_per_block(B, T, A, H);  // L kept P + the last backward's dP
}

double RingSelfAttention::forward_flops_per_block(int B, int T, int A, int /*H*/) const {
  const double Tl = positions(T).size(), r = rank();
  return 4.0 * (r + 1) * B * A * Tl * Tl;  // (r+1) chunks · (Q K_cᵀ + P_c V_c) · 2·B·H·Tl²·hs
}

}  // namespace llmp
