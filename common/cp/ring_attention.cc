// RingAttention (ring_attention.h): the ring of key/value blocks, the online softmax per block,
// and the backward with each block's dK|dV accumulator travelling behind it.
//
// Layouts (row-major f32): qkv (B,Tl,3A) q|k|v; a ring block kv (B,Tl,2A) k|v of its owner's
// rows; an accumulator (B,Tl,2A) dk|dv; m, l, lse, D (B,H,Tl). Head h of (b) is the (Tl,hs)
// strided view at channel h·hs; chunk j (0 or 1) of a view is its rows [j·c, (j+1)·c).
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
/// `t` has n elements and lives on `dev`, or a one-line std::invalid_argument naming it.
void check_tensor(const Tensor& t, int64_t n, Device dev, const char* what) {
  if (!t.defined() || t.numel() != n)
    throw std::invalid_argument(std::string("ring attention: ") + what + " " + t.describe() +
                                " should have " + std::to_string(n) + " elements");
  if (t.device() != dev)
    throw std::invalid_argument(std::string("ring attention: ") + what + " " + t.describe() +
                                " is not on " + to_string(dev) + " with qkv");
}
}  // namespace

// Every buffer below is on qkv's device and every operation on it is a kernel of that device's
// KernelOps (kernels/cpu/attention_block.h and its CUDA twin) or a Tensor operation (fill,
// copy_from): no host loop touches the data, so the same code runs on the CPU and on a GPU.

// ---- forward ----

void RingAttention::forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                            AttentionKeep* keep) {
  const Dims d = dims(qkv, B, T, H, "forward");
  const Device dev = qkv.device();
  check_tensor(out, static_cast<int64_t>(B) * d.Tl * d.A, dev, "out");
  const int hs = d.hs, A = d.A, Tl = d.Tl;
  const long rows = static_cast<long>(B) * Tl;
  KernelOps& ops = kernel_ops(dev);
  const int next = (r_ + 1) % p_, prev = (r_ + p_ - 1) % p_;
  const std::array<int, 2> mine = chunks(r_);

  auto comm = [&] {
    return Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kCommBuffers, dev);
  };
  Tensor kv[2] = {comm(), comm()};
  ops.copy_columns(kv[0].f32(), 2 * A, qkv.f32() + A, 3 * A, rows, 2 * A);  // this rank's K|V
  Tensor m = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations, dev);
  Tensor l = Tensor::zeros({B, H, Tl}, DType::kF32, MemCategory::kActivations, dev);
  m.fill(-std::numeric_limits<float>::infinity());
  out.fill(0.0f);  // O, the unnormalised output, until the end
  Tensor S = attention_scores({Tl, Tl}, DType::kF32, dev);  // one score block, reused for P~

  for (int s = 0; s < p_; ++s) {  // step s computes with the block of rank src = r − s
    const int src = (r_ - s + p_) % p_;
    std::shared_ptr<Work> recv_next, send_this;
    if (s + 1 < p_) {  // pass this block on while computing with it (p − 1 sends)
      recv_next = group_.irecv(kv[(s + 1) % 2], prev, kKvTag);
      send_this = group_.isend(kv[s % 2], next, kKvTag);
      RingWaits::instance().issued(recv_next, send_this);  // ring_waits.h: no-overlap comparison
    }
    // m, l, O updated with block src (the online softmax step of attention_block.h).
    const float* blk = kv[s % 2].f32();
    ops.attention_block_forward(out.f32(), A, m.f32(), l.f32(), S.f32(), qkv.f32(), 3 * A, blk,
                                blk + A, 2 * A, B, H, Tl, hs, block_pairs(mine, chunks(src)));
    if (recv_next) {
      RingWaits::instance().wait(recv_next);
      RingWaits::instance().wait(send_this);
    }
  }

  // out = O / l; lse = m + log l, the one row statistic the backward needs.
  keep->a = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations, dev);
  keep->b = Tensor();
  ops.attention_block_finalize(out.f32(), A, keep->a.f32(), m.f32(), l.f32(), B, H, Tl, hs);
}

// ---- backward ----

void RingAttention::backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                             AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  const Dims d = dims(qkv, B, T, H, "backward");
  const int hs = d.hs, A = d.A, Tl = d.Tl;
  const long rows = static_cast<long>(B) * Tl;
  const Device dev = qkv.device();
  check_tensor(dout, rows * A, dev, "dout");
  check_tensor(out, rows * A, dev, "out");
  check_tensor(dqkv, rows * 3 * A, dev, "dqkv");
  check_tensor(keep->a, static_cast<int64_t>(B) * H * Tl, dev, "keep->a (lse)");
  KernelOps& ops = kernel_ops(dev);
  const int next = (r_ + 1) % p_, prev = (r_ + p_ - 1) % p_;
  const std::array<int, 2> mine = chunks(r_);
  const float* lse = keep->a.f32();

  // D = rowsum(dO ⊙ O) per (b, h, row): the softmax backward's Σ_k P_ik dP_ik without P.
  Tensor D = Tensor::empty({B, H, Tl}, DType::kF32, MemCategory::kActivations, dev);
  ops.attention_block_rowdot(D.f32(), dout.f32(), out.f32(), A, B, H, Tl, hs);

  auto comm = [&] {
    return Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kCommBuffers, dev);
  };
  Tensor kv[2] = {comm(), comm()}, acc[2] = {comm(), comm()};
  ops.copy_columns(kv[0].f32(), 2 * A, qkv.f32() + A, 3 * A, rows, 2 * A);
  Tensor contrib = Tensor::empty({B, Tl, 2 * A}, DType::kF32, MemCategory::kActivations, dev);
  Tensor P = attention_scores({Tl, Tl}, DType::kF32, dev);
  Tensor dS = attention_scores({Tl, Tl}, DType::kF32, dev);
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
    // dQ += dS K into dqkv; this rank's dK|dV contribution to block src into contrib.
    const float* blk = kv[s % 2].f32();
    contrib.fill(0.0f);
    ops.attention_block_backward(dqkv.f32(), contrib.f32(), contrib.f32() + A, 2 * A, P.f32(),
                                 dS.f32(), qkv.f32(), 3 * A, blk, blk + A, 2 * A, dout.f32(), A,
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
  ops.copy_columns(dqkv.f32() + A, 3 * A, home.f32(), 2 * A, rows, 2 * A);
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
