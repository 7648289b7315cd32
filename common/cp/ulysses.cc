// DeepSpeed-Ulysses attention: all_to_all to a head split, local attention, all_to_all back
// (ulysses.h has the picture and the closed forms).
//
// The two re-layouts, with Ah = A/p channels (H/p heads) per head group and chunk index first so
// that all_to_all's chunk j is what goes to rank j:
//   by_heads    (B,Tl,k·A)  -> send (p,B,Tl,k·Ah): chunk j = columns of head group j of each of
//                              the k parts (q|k|v: k = 3; out, dout: k = 1)
//   to_rows     recv (p,B,Tl,k·Ah) -> (B,T,k·Ah): chunk i = the rows of rank i's positions
// and their inverses on the way back. Each is a copy; the arithmetic is kernels/cpu/attention's.
//
// Glossary: B sequences, T positions, Tl = T/p held, A channels, Ah = A/p, H heads, p ranks.
#include "common/cp/ulysses.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/attention.h"

namespace llmp {
namespace {

Tensor comm_buffer(int64_t n) { return Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers); }

/// src (B,Tl,k·A) -> dst (p,B,Tl,k·Ah): chunk j holds head group j's columns of each part.
void by_heads(float* dst, const float* src, int p, int B, int Tl, int k, int A) {
  const int Ah = A / p;
  const int64_t rows = int64_t{B} * Tl;
  for (int j = 0; j < p; ++j)
    for (int64_t n = 0; n < rows; ++n)
      for (int part = 0; part < k; ++part)
        std::memcpy(dst + ((j * rows + n) * k + part) * Ah, src + (n * k + part) * A + j * Ah,
                    sizeof(float) * Ah);
}

/// The inverse of by_heads: src (p,B,Tl,k·Ah), chunk j from head group j -> dst (B,Tl,k·A).
void from_heads(float* dst, const float* src, int p, int B, int Tl, int k, int A) {
  const int Ah = A / p;
  const int64_t rows = int64_t{B} * Tl;
  for (int j = 0; j < p; ++j)
    for (int64_t n = 0; n < rows; ++n)
      for (int part = 0; part < k; ++part)
        std::memcpy(dst + (n * k + part) * A + j * Ah, src + ((j * rows + n) * k + part) * Ah,
                    sizeof(float) * Ah);
}

/// src (p,B,Tl,w), chunk i = rank i's rows -> dst (B,T,w) with T = p·Tl (contiguous split).
void to_rows(float* dst, const float* src, int p, int B, int Tl, int w) {
  for (int i = 0; i < p; ++i)
    for (int b = 0; b < B; ++b)
      std::memcpy(dst + (int64_t{b} * p * Tl + int64_t{i} * Tl) * w,
                  src + ((int64_t{i} * B + b) * Tl) * w, sizeof(float) * Tl * w);
}

/// The inverse of to_rows: src (B,T,w) -> dst (p,B,Tl,w), chunk i = rank i's rows.
void from_rows(float* dst, const float* src, int p, int B, int Tl, int w) {
  for (int i = 0; i < p; ++i)
    for (int b = 0; b < B; ++b)
      std::memcpy(dst + ((int64_t{i} * B + b) * Tl) * w,
                  src + (int64_t{b} * p * Tl + int64_t{i} * Tl) * w, sizeof(float) * Tl * w);
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
  if (T % p != 0) throw std::invalid_argument(split_error(T, p, p));
  std::vector<int> pos(T / p);
  for (int j = 0; j < T / p; ++j) pos[j] = rank() * (T / p) + j;
  return pos;
}

void UlyssesAttention::forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                               AttentionKeep* keep) {
  const int p = shards();
  if (const std::string err = split_error(T, H, p); !err.empty()) throw std::invalid_argument(err);
  const int Tl = T / p, A = static_cast<int>(out.dim(2)), Ah = A / p, Hh = H / p;
  *keep = AttentionKeep{};
  {  // all_to_all #1: q|k|v of my rows, by head group -> my head group, every rank's rows
    Tensor send = comm_buffer(int64_t{B} * Tl * 3 * A), recv = comm_buffer(send.numel());
    by_heads(send.f32(), qkv.f32(), p, B, Tl, 3, A);
    group_.all_to_all(send, recv);
    keep->b = Tensor::empty({B, T, 3 * Ah}, DType::kF32, MemCategory::kActivations);
    to_rows(keep->b.f32(), recv.f32(), p, B, Tl, 3 * Ah);
  }
  // Attention of H/p whole heads over whole sequences: nothing here needs another rank.
  keep->a = attention_scores({B, Hh, T, T});
  Tensor out_h = Tensor::empty({B, T, Ah}, DType::kF32, MemCategory::kActivations);
  cpu::attention_forward(out_h.f32(), keep->a.f32(), keep->b.f32(), B, T, Ah, Hh);
  // all_to_all #2: the output rows back to the ranks holding their positions.
  Tensor send = comm_buffer(int64_t{B} * T * Ah), recv = comm_buffer(send.numel());
  from_rows(send.f32(), out_h.f32(), p, B, Tl, Ah);
  group_.all_to_all(send, recv);
  from_heads(out.f32(), recv.f32(), p, B, Tl, 1, A);
}

void UlyssesAttention::backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) {
  (void)qkv, (void)out;  // the head-split q|k|v and P were kept: no third all_to_all
  const int p = shards();
  if (const std::string err = split_error(T, H, p); !err.empty()) throw std::invalid_argument(err);
  const int Tl = T / p, A = static_cast<int>(dout.dim(2)), Ah = A / p, Hh = H / p;
  Tensor dout_h = Tensor::empty({B, T, Ah}, DType::kF32, MemCategory::kActivations);
  {  // all_to_all #3 (mirror of #2): dout of my rows, by head group
    Tensor send = comm_buffer(int64_t{B} * Tl * A), recv = comm_buffer(send.numel());
    by_heads(send.f32(), dout.f32(), p, B, Tl, 1, A);
    group_.all_to_all(send, recv);
    to_rows(dout_h.f32(), recv.f32(), p, B, Tl, Ah);
  }
  Tensor dqkv_h = Tensor::empty({B, T, 3 * Ah}, DType::kF32, MemCategory::kActivations);
  {
    Tensor scratch = attention_scores({T, T});  // dP of one head
    cpu::attention_backward(dqkv_h.f32(), dout_h.f32(), keep->b.f32(), keep->a.f32(),
                            scratch.f32(), B, T, Ah, Hh);
  }
  *keep = AttentionKeep{};
  // all_to_all #4 (mirror of #1): dq|dk|dv rows back to their positions' ranks.
  Tensor send = comm_buffer(int64_t{B} * T * 3 * Ah), recv = comm_buffer(send.numel());
  from_rows(send.f32(), dqkv_h.f32(), p, B, Tl, 3 * Ah);
  group_.all_to_all(send, recv);
  from_heads(dqkv.f32(), recv.f32(), p, B, Tl, 3, A);
}

double UlyssesAttention::bytes_per_block(int B, int T, int A, int H) const {
  (void)H;
  const double p = shards(), Tl = double(T) / p;
  return (p - 1) / p * 4.0 * (3 + 1 + 1 + 3) * B * Tl * A;
}

double UlyssesAttention::kept_bytes_per_block(int B, int T, int A, int H) const {
  const double p = shards();
  return 4.0 * B * T * (double(H) * T + 3.0 * A) / p;
}

double UlyssesAttention::peak_score_bytes(int B, int T, int A, int H, int L) const {
  (void)A;
  const double p = shards();
  return 4.0 * (double(L) * B * (H / p) * T * T + double(T) * T);
}

double UlyssesAttention::forward_flops_per_block(int B, int T, int A, int H) const {
  const double p = shards(), hs = double(A) / H;
  return B * (H / p) * (2.0 * T * T * hs + double(T) * (T + 1) * hs);
}

}  // namespace llmp
