// RingAttention (ring_attention.h): the ring of key/value blocks, the online softmax per block,
// and the backward with each block's dK|dV accumulator travelling behind it.
//
// Layouts (row-major): qkv (B,Tl,3A) q|k|v; a ring block kv (B,Tl,2A) k|v of its owner's rows,
// in qkv's dtype; an accumulator (B,Tl,2A) dk|dv, fp32; m, l, lse, D (B,H,Tl), fp32. Head h of
// (b) is the (Tl,hs) strided view at channel h·hs; chunk j (0 or 1) of a view is its rows
// [j·c, (j+1)·c).
//
// Mixed precision (takes_16bit): q|k|v, out, dout and dqkv arrive in 16 bits as the walk stores
// them. The K|V blocks travel in 16 bits (exact: they are 16-bit values; half the bytes of an
// fp32 block), and each is widened into an fp32 scratch block before the step's kernel; the
// kernels compute in fp32 on a widened copy of q|k|v (and dout, out), O and dQ accumulate in
// fp32, and out and dqkv are rounded once at the end. The dK|dV accumulators stay fp32: each hop
// adds a contribution, and rounding every partial sum to 16 bits would lose what fp32
// accumulation is for. So the results are those of the fp32 core run on the widened 16-bit
// inputs (WidenedCore), bit for bit, with fewer bytes on the ring.
//
// The math of one step (the chunk pairs of this rank's queries with one block's keys, over every
// (b, h)) is kernels/cpu/attention_block.h, reached through kernel_ops(qkv.device()): the CPU
// kernels there are the loops this file ran before, the CUDA twins kernels/cuda/attention_block.
//
// Glossary: as ring_attention.h; src the rank that owns the block being computed with.
#include "common/cp/ring_attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/cp/f32_copies.h"
#include "common/cp/ring_waits.h"
#include "kernels/cpu/attention_block.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

struct RingAttention::Dims {
  int B, T, H, Tl, c, A, hs;
};

namespace {
using cpu::BlockPairs;
using cpu::ChunkPair;

constexpr int kKvTag = 0, kAccTag = 1;  // K|V blocks and dK|dV accumulators: separate streams

/// How a (query chunk, key chunk) pair of global chunk indices is computed.
ChunkPair pair_kind(int q_chunk, int k_chunk) {
  return k_chunk > q_chunk    ? ChunkPair::kSkip
         : k_chunk == q_chunk ? ChunkPair::kDiagonal
                              : ChunkPair::kFull;
}
/// The four pairs of this rank's query chunks `mine` with the key chunks `theirs` of a block.
BlockPairs block_pairs(const std::array<int, 2>& mine, const std::array<int, 2>& theirs) {
  BlockPairs bp;
  for (int qi = 0; qi < 2; ++qi)
    for (int ki = 0; ki < 2; ++ki) bp.kind[qi][ki] = pair_kind(mine[qi], theirs[ki]);
  return bp;
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
/// `t` has n elements of `dt` and lives on `dev`, or a one-line std::invalid_argument naming it.
void check_tensor(const Tensor& t, int64_t n, Device dev, DType dt, const char* what) {
  if (!t.defined() || t.numel() != n)
    throw std::invalid_argument(std::string("ring attention: ") + what + " " + t.describe() +
                                " should have " + std::to_string(n) + " elements");
  if (t.device() != dev || t.dtype() != dt)
    throw std::invalid_argument(std::string("ring attention: ") + what + " " + t.describe() +
                                " is not " + to_string(dt) + " on " + to_string(dev) +
                                " with qkv");
}

/// The ring's K|V blocks in qkv's dtype: rank r's own block packed from the fp32 q|k|v `x32`
/// (columns [A, 3A)), rounded into blk[0] when 16-bit (exact: the values are 16-bit); `scratch`
/// is the fp32 block the kernels read (undefined for fp32: they read the block itself).
struct KvRing {
  Tensor blk[2], scratch;
  KvRing(const Tensor& x32, DType dt, int B, int Tl, int A) {
    const Device dev = x32.device();
    for (Tensor& b : blk) b = Tensor::empty({B, Tl, 2 * A}, dt, MemCategory::kCommBuffers, dev);
    KernelOps& ops = kernel_ops(dev);
    const long rows = static_cast<long>(B) * Tl;
    if (dt == DType::kF32) {
      ops.copy_columns(blk[0].f32(), 2 * A, x32.f32() + A, 3 * A, rows, 2 * A);
      return;
    }
    scratch = Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kOther, dev);
    ops.copy_columns(scratch.f32(), 2 * A, x32.f32() + A, 3 * A, rows, 2 * A);
    ops.round_to(scratch.f32(), blk[0].raw(), dt, scratch.numel());
  }
  /// Block i as fp32 floats for a kernel: itself, or widened into the scratch.
  const float* f32(int i) {
    if (!scratch.defined()) return blk[i].f32();
    kernel_ops(scratch.device()).widen(blk[i].raw(), blk[i].dtype(), scratch.f32(),
                                       scratch.numel());
    return scratch.f32();
  }
};
}  // namespace

// Every buffer below is on qkv's device and every operation on it is a kernel of that device's
// KernelOps (kernels/cpu/attention_block.h and its CUDA twin) or a Tensor operation (fill,
// copy_from): no host loop touches the data, so the same code runs on the CPU and on a GPU.

// ---- forward ----

void RingAttention::forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                            AttentionKeep* keep) {
  const Dims d = dims(qkv, B, T, H, "forward");
  const Device dev = qkv.device();
  const DType dt = qkv.dtype();  // f32, or 16-bit as stored: the K|V blocks travel in it
  check_tensor(out, static_cast<int64_t>(B) * d.Tl * d.A, dev, dt, "out");
  const int hs = d.hs, A = d.A, Tl = d.Tl;
  KernelOps& ops = kernel_ops(dev);
  const int next = (r_ + 1) % p_, prev = (r_ + p_ - 1) % p_;
  const std::array<int, 2> mine = chunks(r_);

  const Tensor x = as_f32(qkv);  // the kernels' fp32 q|k|v (qkv itself in fp32)
  KvRing kv(x, dt, B, Tl, A);    // this rank's K|V in kv.blk[0]
  Tensor m = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations, dev);
  Tensor l = Tensor::zeros({B, H, Tl}, DType::kF32, MemCategory::kActivations, dev);
  m.fill(-std::numeric_limits<float>::infinity());
  Tensor o = f32_result(out);  // O, the unnormalised output, in fp32 until the end
  o.fill(0.0f);
  Tensor S = attention_scores({Tl, Tl}, DType::kF32, dev);  // one score block, reused for P~

  for (int s = 0; s < p_; ++s) {  // step s computes with the block of rank src = r − s
    const int src = (r_ - s + p_) % p_;
    std::shared_ptr<Work> recv_next, send_this;
    if (s + 1 < p_) {  // pass this block on while computing with it (p − 1 sends)
      recv_next = group_.irecv(kv.blk[(s + 1) % 2], prev, kKvTag);
      send_this = group_.isend(kv.blk[s % 2], next, kKvTag);
      RingWaits::instance().issued(recv_next, send_this);  // ring_waits.h: no-overlap comparison
    }
    // m, l, O updated with block src (the online softmax step of attention_block.h).
    const float* blk = kv.f32(s % 2);
    ops.attention_block_forward(o.f32(), A, m.f32(), l.f32(), S.f32(), x.f32(), 3 * A, blk,
                                blk + A, 2 * A, B, H, Tl, hs, block_pairs(mine, chunks(src)));
    if (recv_next) {
      RingWaits::instance().wait(recv_next);
      RingWaits::instance().wait(send_this);
    }
  }

  // out = O / l; lse = m + log l, the one row statistic the backward needs.
  keep->a = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations, dev);
  keep->b = Tensor();
  ops.attention_block_finalize(o.f32(), A, keep->a.f32(), m.f32(), l.f32(), B, H, Tl, hs);
  round_into(out, o);  // 16-bit: rounded once
}

// ---- backward ----

void RingAttention::backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                             AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  const Dims d = dims(qkv, B, T, H, "backward");
  const int hs = d.hs, A = d.A, Tl = d.Tl;
  const long rows = static_cast<long>(B) * Tl;
  const Device dev = qkv.device();
  const DType dt = qkv.dtype();
  check_tensor(dout, rows * A, dev, dt, "dout");
  check_tensor(out, rows * A, dev, dt, "out");
  check_tensor(dqkv, rows * 3 * A, dev, dt, "dqkv");
  check_tensor(keep->a, static_cast<int64_t>(B) * H * Tl, dev, DType::kF32, "keep->a (lse)");
  KernelOps& ops = kernel_ops(dev);
  const int next = (r_ + 1) % p_, prev = (r_ + p_ - 1) % p_;
  const std::array<int, 2> mine = chunks(r_);
  const float* lse = keep->a.f32();

  // The kernels' fp32 inputs (the tensors themselves in fp32) and the fp32 dq|dk|dv.
  const Tensor x = as_f32(qkv), dy = as_f32(dout), o = as_f32(out);
  Tensor dx = f32_result(dqkv);

  // D = rowsum(dO ⊙ O) per (b, h, row): the softmax backward's Σ_k P_ik dP_ik without P.
  Tensor D = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations, dev);
  ops.attention_block_rowdot(D.f32(), dy.f32(), o.f32(), A, B, H, Tl, hs);

  auto comm = [&] {  // a dK|dV accumulator: fp32 in every precision
    return Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kCommBuffers, dev);
  };
  KvRing kv(x, dt, B, Tl, A);
  Tensor acc[2] = {comm(), comm()};
  Tensor contrib = Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kActivations, dev);
  Tensor P = attention_scores({Tl, Tl}, DType::kF32, dev);
  Tensor dS = attention_scores({Tl, Tl}, DType::kF32, dev);
  dx.fill(0.0f);  // dQ accumulates over the blocks; dK|dV come home at the end
  std::shared_ptr<Work> acc_sent[2];

  for (int s = 0; s < p_; ++s) {
    const int src = (r_ - s + p_) % p_;
    std::shared_ptr<Work> recv_next, send_this, acc_recv;
    if (s + 1 < p_) {
      recv_next = group_.irecv(kv.blk[(s + 1) % 2], prev, kKvTag);
      send_this = group_.isend(kv.blk[s % 2], next, kKvTag);
      RingWaits::instance().issued(recv_next, send_this);  // ring_waits.h: no-overlap comparison
    }
    Tensor& a = acc[s % 2];  // block src's accumulator: from rank r − 1, which held it at s − 1
    if (s > 0) {
      RingWaits::instance().wait(acc_sent[s % 2]);  // its previous content has left
      acc_recv = group_.irecv(a, prev, kAccTag);
      RingWaits::instance().issued(acc_recv);
    }
    // dQ += dS K into dqkv; this rank's dK|dV contribution to block src into contrib.
    const float* blk = kv.f32(s % 2);
    contrib.fill(0.0f);
    ops.attention_block_backward(dx.f32(), contrib.f32(), contrib.f32() + A, 2 * A, P.f32(),
                                 dS.f32(), x.f32(), 3 * A, blk, blk + A, 2 * A, dy.f32(), A,
                                 lse, D.f32(), B, H, Tl, hs, block_pairs(mine, chunks(src)));
    if (s == 0) {
      a.copy_from(contrib);  // this rank's own block: its first visitor
    } else {
      RingWaits::instance().wait(acc_recv);
      ops.accumulate_to(contrib.f32(), a.f32(), DType::kF32, a.numel());  // a += contrib
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
  ops.copy_columns(dx.f32() + A, 3 * A, home.f32(), 2 * A, rows, 2 * A);
  round_into(dqkv, dx);  // 16-bit: rounded once
  for (auto& w : acc_sent) RingWaits::instance().wait(w);
  keep->a = Tensor();
  keep->b = Tensor();
}

// ---- closed forms (stages/ring_attention/README.md derives each) ----

double RingAttention::bytes_per_block(int B, int T, int A, int /*H*/) const {
  if (p_ == 1) return 0.0;
  // 2(p − 1) K|V blocks of 2e·B·Tl·A bytes (forward and backward), p fp32 dK|dV accumulators of
  // 8·B·Tl·A: fp32 (e = 4) (3p − 2)·8·B·Tl·A, 16-bit (e = 2) (2p − 1)·8·B·Tl·A.
  const double Tl = static_cast<double>(T) / p_;
  return (2.0 * (p_ - 1) * 2 * stored_bytes() + 8.0 * p_) * B * Tl * A;
}
std::string RingAttention::bytes_formula_text() const {
  return stored_bytes() == 4 ? "(3p-2)·8BTA/p" : "(2p-1)·8BTA/p";
}
int RingAttention::calls_per_block() const { return p_ == 1 ? 0 : 3 * p_ - 2; }
double RingAttention::forward_bytes_per_block(int B, int T, int A, int /*H*/) const {
  return (p_ - 1.0) * 2 * stored_bytes() * B * (static_cast<double>(T) / p_) * A;
}
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
