// DeepSpeed-Ulysses attention: all_to_all to a head split, local attention, all_to_all back
// (ulysses.h has the picture and the closed forms).
//
// The two re-layouts, with Ah = A/p channels (H/p heads) per head group and chunk index first so
// that all_to_all's chunk j is what goes to rank j:
//   by_heads    (B,Tl,k·A)  -> send (p,B,Tl,k·Ah): chunk j = columns of head group j of each of
//                              the k parts (q|k|v: k = 3; out, dout: k = 1)
//   to_rows     recv (p,B,Tl,k·Ah) -> (B,T,k·Ah): chunk i = the rows of rank i's positions
// and their inverses on the way back. Each is made of strided copies (copy_strided,
// common/tensor/tensor.h) through the tensors' device allocator: memmoves on the CPU, one
// cudaMemcpy2DAsync each on a GPU (never a host access to device memory). A head re-layout is p·k
// of them (B·Tl runs of Ah elements each), a row one min(p, B) (swap_leading_dims): the host's
// calls do not grow with the batch or the sequence (tests:gpu_step_counts_test counts them on the
// CUDA emulator; a copy per run was p·B·Tl·k). The arithmetic is kernel_ops(device)'s attention.
//
// Mixed precision (takes_16bit): every buffer is in the dtype of the q|k|v it is handed (the
// walk's activations as stored), so in bf16/fp16 the re-layouts copy 2-byte elements and each
// all_to_all carries 2 bytes per element. The local attention is the whole-sequence sub-layer's
// call (common/nn/attention.cc) on H/p heads: the same kernel on the same 16-bit values, P kept
// in 16 bits and, in bf16, P and dS rounded before their products (sublayer.h rounded_products).
//
// Glossary: B sequences, T positions, Tl = T/p held, A channels, Ah = A/p, H heads, p ranks.
#include "common/cp/ulysses.h"

#include <stdexcept>
#include <string>

#include "common/nn/sublayer.h"  // rounded_products
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

Tensor comm_buffer(int64_t n, DType dt, Device d) {
  return Tensor::empty({n}, dt, MemCategory::kCommBuffers, d);
}

/// src (B,Tl,k·A) -> dst (p,B,Tl,k·Ah): chunk j holds head group j's columns of each part. One
/// strided copy per (j, part): the B·Tl rows' Ah columns from stride k·A to stride k·Ah.
void by_heads(const Tensor& dst, const Tensor& src, int p, int B, int Tl, int k, int A) {
  const int64_t Ah = A / p, rows = int64_t{B} * Tl;
  for (int j = 0; j < p; ++j)
    for (int part = 0; part < k; ++part)
      copy_strided(dst, {(j * rows * k + part) * Ah, k * Ah}, src, {part * A + j * Ah, k * A}, Ah,
                   rows);
}

/// The inverse of by_heads: src (p,B,Tl,k·Ah), chunk j from head group j -> dst (B,Tl,k·A).
void from_heads(const Tensor& dst, const Tensor& src, int p, int B, int Tl, int k, int A) {
  const int64_t Ah = A / p, rows = int64_t{B} * Tl;
  for (int j = 0; j < p; ++j)
    for (int part = 0; part < k; ++part)
      copy_strided(dst, {part * A + j * Ah, k * A}, src, {(j * rows * k + part) * Ah, k * Ah}, Ah,
                   rows);
}

/// src (p,B,Tl,w), chunk i = rank i's rows -> dst (B,T,w) with T = p·Tl (contiguous split): the
/// leading (p, B) swapped, min(p, B) strided copies of runs of Tl·w elements.
void to_rows(const Tensor& dst, const Tensor& src, int p, int B) {
  swap_leading_dims(dst, src, p, B);
}

/// The inverse of to_rows: src (B,T,w) -> dst (p,B,Tl,w), chunk i = rank i's rows.
void from_rows(const Tensor& dst, const Tensor& src, int p, int B) {
  swap_leading_dims(dst, src, B, p);
}

}  // namespace

std::string UlyssesAttention::split_error(int T, int H, int p) {
  if (T % p != 0)
    return "Ulysses: T=" + std::to_string(T) + " is not divisible by p=" + std::to_string(p) +
           " ranks";
  if (H % p != 0)
    return "Ulysses: p=" + std::to_string(p) + " does not divide H=" + std::to_string(H) +
           " heads (each rank attends with H/p whole heads)";
  return "";
}

std::vector<int> UlyssesAttention::positions(int T) const {
  const int p = shards();
  // Only T's part of split_error applies to positions: H = p passes its head check by design.
  if (T % p != 0) throw std::invalid_argument(split_error(T, /*H=*/p, p));
  std::vector<int> pos(T / p);
  for (int j = 0; j < T / p; ++j) pos[j] = rank() * (T / p) + j;
  return pos;
}

void UlyssesAttention::forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                               AttentionKeep* keep) {
  const int p = shards();
  if (const std::string err = split_error(T, H, p); !err.empty()) throw std::invalid_argument(err);
  const int Tl = T / p, A = static_cast<int>(out.dim(2)), Ah = A / p, Hh = H / p;
  const Device dev = qkv.device();  // every buffer beside the model's activations
  const DType dt = qkv.dtype();     // and in their dtype (f32, or 16-bit as stored)
  *keep = AttentionKeep{};
  {  // all_to_all #1: q|k|v of my rows, by head group -> my head group, every rank's rows
    Tensor send = comm_buffer(int64_t{B} * Tl * 3 * A, dt, dev);
    Tensor recv = comm_buffer(send.numel(), dt, dev);
    by_heads(send, qkv, p, B, Tl, 3, A);
    group_.all_to_all(send, recv);
    keep->b = Tensor::empty({B, T, 3 * Ah}, dt, MemCategory::kActivations, dev);
    to_rows(keep->b, recv, p, B);
  }
  // Attention of H/p whole heads over whole sequences: nothing here needs another rank.
  keep->a = attention_scores({B, Hh, T, T}, dt, dev);
  Tensor out_h = Tensor::empty({B, T, Ah}, dt, MemCategory::kActivations, dev);
  kernel_ops(dev).attention_forward(as_stored(out_h), as_stored(keep->a), as_stored(keep->b), B, T,
                                    Ah, Hh, rounded_products(dt));
  // all_to_all #2: the output rows back to the ranks holding their positions.
  Tensor send = comm_buffer(int64_t{B} * T * Ah, dt, dev);
  Tensor recv = comm_buffer(send.numel(), dt, dev);
  from_rows(send, out_h, p, B);
  group_.all_to_all(send, recv);
  from_heads(out, recv, p, B, Tl, 1, A);
}

void UlyssesAttention::backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  (void)qkv, (void)out;  // the head-split q|k|v and P were kept: no third all_to_all
  const int p = shards();
  if (const std::string err = split_error(T, H, p); !err.empty()) throw std::invalid_argument(err);
  const int Tl = T / p, A = static_cast<int>(dout.dim(2)), Ah = A / p, Hh = H / p;
  const Device dev = dout.device();
  const DType dt = dout.dtype();
  Tensor dout_h = Tensor::empty({B, T, Ah}, dt, MemCategory::kActivations, dev);
  {  // all_to_all #3 (mirror of #2): dout of my rows, by head group
    Tensor send = comm_buffer(int64_t{B} * Tl * A, dt, dev);
    Tensor recv = comm_buffer(send.numel(), dt, dev);
    by_heads(send, dout, p, B, Tl, 1, A);
    group_.all_to_all(send, recv);
    to_rows(dout_h, recv, p, B);
  }
  Tensor dqkv_h = Tensor::empty({B, T, 3 * Ah}, dt, MemCategory::kActivations, dev);
  {
    Tensor scratch = attention_scores({T, T}, DType::kF32, dev);  // dP of one head (fp32)
    kernel_ops(dev).attention_backward(as_stored(dqkv_h), as_stored(dout_h), as_stored(keep->b),
                                       as_stored(keep->a), scratch.f32(), B, T, Ah, Hh,
                                       rounded_products(dt));
  }
  *keep = AttentionKeep{};
  // all_to_all #4 (mirror of #1): dq|dk|dv rows back to their positions' ranks.
  Tensor send = comm_buffer(int64_t{B} * T * 3 * Ah, dt, dev);
  Tensor recv = comm_buffer(send.numel(), dt, dev);
  from_rows(send, dqkv_h, p, B);
  group_.all_to_all(send, recv);
  from_heads(dqkv, recv, p, B, Tl, 3, A);
}

double UlyssesAttention::bytes_per_block(int B, int T, int A, int H) const {
  (void)H;
  const double p = shards(), Tl = double(T) / p;
  return (p - 1) / p * stored_bytes() * (3 + 1 + 1 + 3) * B * Tl * A;
}

double UlyssesAttention::forward_bytes_per_block(int B, int T, int A, int H) const {
  (void)H;
  const double p = shards(), Tl = double(T) / p;
  return (p - 1) / p * stored_bytes() * (3 + 1) * B * Tl * A;
}

std::string UlyssesAttention::bytes_formula_text() const {
  return stored_bytes() == 4 ? "32(p-1)·bTh/p²" : "16(p-1)·bTh/p²";
}

double UlyssesAttention::kept_bytes_per_block(int B, int T, int A, int H) const {
  const double p = shards();
  return stored_bytes() * B * T * (double(H) * T + 3.0 * A) / p;
}

double UlyssesAttention::peak_score_bytes(int B, int T, int A, int H, int L) const {
  (void)A;
  const double p = shards();
  // L blocks' P in the stored dtype, the backward's dP of one head in fp32.
  return stored_bytes() * double(L) * B * (H / p) * T * T + 4.0 * double(T) * T;
}

std::string UlyssesAttention::peak_score_formula_text() const {
  return stored_bytes() == 4 ? "4(L·bas²/p + s²)" : "2L·bas²/p + 4s²";
}

double UlyssesAttention::forward_flops_per_block(int B, int T, int A, int H) const {
  const double p = shards(), hs = double(A) / H;
  return B * (H / p) * (2.0 * T * T * hs + double(T) * (T + 1) * hs);
}

}  // namespace llmp
