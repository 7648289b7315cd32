// DeepSpeed-Ulysses attention: all_to_all to a head split, local attention, all_to_all back
// (ulysses.h has the picture and the closed forms).
//
// The two re-layouts, with Ah = A/p channels (H/p heads) per head group and chunk index first so
// that all_to_all's chunk j is what goes to rank j:
//   by_heads    (B,Tl,k·A)  -> send (p,B,Tl,k·Ah): chunk j = columns of head group j of each of
//                              the k parts (q|k|v: k = 3; out, dout: k = 1)
//   to_rows     recv (p,B,Tl,k·Ah) -> (B,T,k·Ah): chunk i = the rows of rank i's positions
// and their inverses on the way back. Each is a copy of contiguous runs (Ah floats for the head
// columns, Tl·w for a rank's rows) through the tensors' device allocator: a memmove on the CPU, a
// device-to-device copy on a GPU (never a host access to device memory); p·B·Tl·k runs for a
// head re-layout, p·B for a row one. The arithmetic is kernel_ops(device)'s attention.
//
// Glossary: B sequences, T positions, Tl = T/p held, A channels, Ah = A/p, H heads, p ranks.
#include "common/cp/ulysses.h"

#include <stdexcept>
#include <string>

#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

Tensor comm_buffer(int64_t n, Device d) {
  return Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers, d);
}

/// Copies n floats from src[s0..) to dst[d0..), both f32 tensors on one device: the device's
/// own copy (Allocator::copy), so the pointers are never dereferenced here.
class RunCopier {
 public:
  RunCopier(const Tensor& dst, const Tensor& src)
      : dst_(dst.f32()), src_(src.f32()), dev_(dst.device()), alloc_(allocator_for(dev_)) {
    if (src.device() != dev_)
      throw std::invalid_argument("Ulysses: a re-layout from " + src.describe() + " to " +
                                  dst.describe() + " crosses devices");
  }
  void operator()(int64_t d0, int64_t s0, int64_t n) const {
    alloc_.copy(dst_ + d0, dev_, src_ + s0, dev_, int64_t(sizeof(float)) * n);
  }

 private:
  float* dst_;
  const float* src_;
  Device dev_;
  Allocator& alloc_;
};

/// src (B,Tl,k·A) -> dst (p,B,Tl,k·Ah): chunk j holds head group j's columns of each part.
void by_heads(const Tensor& dst, const Tensor& src, int p, int B, int Tl, int k, int A) {
  const RunCopier copy(dst, src);
  const int Ah = A / p;
  const int64_t rows = int64_t{B} * Tl;
  for (int j = 0; j < p; ++j)
    for (int64_t n = 0; n < rows; ++n)
      for (int part = 0; part < k; ++part)
        copy(((j * rows + n) * k + part) * Ah, (n * k + part) * A + j * Ah, Ah);
}

/// The inverse of by_heads: src (p,B,Tl,k·Ah), chunk j from head group j -> dst (B,Tl,k·A).
void from_heads(const Tensor& dst, const Tensor& src, int p, int B, int Tl, int k, int A) {
  const RunCopier copy(dst, src);
  const int Ah = A / p;
  const int64_t rows = int64_t{B} * Tl;
  for (int j = 0; j < p; ++j)
    for (int64_t n = 0; n < rows; ++n)
      for (int part = 0; part < k; ++part)
        copy((n * k + part) * A + j * Ah, ((j * rows + n) * k + part) * Ah, Ah);
}

/// src (p,B,Tl,w), chunk i = rank i's rows -> dst (B,T,w) with T = p·Tl (contiguous split).
void to_rows(const Tensor& dst, const Tensor& src, int p, int B, int Tl, int w) {
  const RunCopier copy(dst, src);
  for (int i = 0; i < p; ++i)
    for (int b = 0; b < B; ++b)
      copy((int64_t{b} * p * Tl + int64_t{i} * Tl) * w, ((int64_t{i} * B + b) * Tl) * w,
           int64_t{Tl} * w);
}

/// The inverse of to_rows: src (B,T,w) -> dst (p,B,Tl,w), chunk i = rank i's rows.
void from_rows(const Tensor& dst, const Tensor& src, int p, int B, int Tl, int w) {
  const RunCopier copy(dst, src);
  for (int i = 0; i < p; ++i)
    for (int b = 0; b < B; ++b)
      copy(((int64_t{i} * B + b) * Tl) * w, (int64_t{b} * p * Tl + int64_t{i} * Tl) * w,
           int64_t{Tl} * w);
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
  *keep = AttentionKeep{};
  {  // all_to_all #1: q|k|v of my rows, by head group -> my head group, every rank's rows
    Tensor send = comm_buffer(int64_t{B} * Tl * 3 * A, dev), recv = comm_buffer(send.numel(), dev);
    by_heads(send, qkv, p, B, Tl, 3, A);
    group_.all_to_all(send, recv);
    keep->b = Tensor::empty({B, T, 3 * Ah}, DType::kF32, MemCategory::kActivations, dev);
    to_rows(keep->b, recv, p, B, Tl, 3 * Ah);
  }
  // Attention of H/p whole heads over whole sequences: nothing here needs another rank.
  keep->a = attention_scores({B, Hh, T, T}, DType::kF32, dev);
  Tensor out_h = Tensor::empty({B, T, Ah}, DType::kF32, MemCategory::kActivations, dev);
  kernel_ops(dev).attention_forward(out_h.f32(), keep->a.f32(), keep->b.f32(), B, T, Ah, Hh);
  // all_to_all #2: the output rows back to the ranks holding their positions.
  Tensor send = comm_buffer(int64_t{B} * T * Ah, dev), recv = comm_buffer(send.numel(), dev);
  from_rows(send, out_h, p, B, Tl, Ah);
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
  Tensor dout_h = Tensor::empty({B, T, Ah}, DType::kF32, MemCategory::kActivations, dev);
  {  // all_to_all #3 (mirror of #2): dout of my rows, by head group
    Tensor send = comm_buffer(int64_t{B} * Tl * A, dev), recv = comm_buffer(send.numel(), dev);
    by_heads(send, dout, p, B, Tl, 1, A);
    group_.all_to_all(send, recv);
    to_rows(dout_h, recv, p, B, Tl, Ah);
  }
  Tensor dqkv_h = Tensor::empty({B, T, 3 * Ah}, DType::kF32, MemCategory::kActivations, dev);
  {
    Tensor scratch = attention_scores({T, T}, DType::kF32, dev);  // dP of one head
    kernel_ops(dev).attention_backward(dqkv_h.f32(), dout_h.f32(), keep->b.f32(), keep->a.f32(),
                                       scratch.f32(), B, T, Ah, Hh);
  }
  *keep = AttentionKeep{};
  // all_to_all #4 (mirror of #1): dq|dk|dv rows back to their positions' ranks.
  Tensor send = comm_buffer(int64_t{B} * T * 3 * Ah, dev), recv = comm_buffer(send.numel(), dev);
  from_rows(send, dqkv_h, p, B, Tl, 3 * Ah);
  group_.all_to_all(send, recv);
  from_heads(dqkv, recv, p, B, Tl, 3, A);
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
