// Lab ulysses_all_to_all, reference solution (for instructors; students start from
// ../starter.cc).
//
// all_to_all sends chunk j of its input to rank j and puts rank i's chunk i of the output. So the
// work is in the layouts on either side of it:
//   seq_to_heads  pack: chunk j = my positions of head group j, (Tl, Hp, hs), a strided copy out
//                 of x. The output needs no unpacking: chunk i (from rank i) is rank i's Tl
//                 positions of my heads, which is rows [i·Tl, (i+1)·Tl) of (T, Hp, hs).
//   heads_to_seq  the mirror: chunk j = rows [j·Tl, (j+1)·Tl) of y, contiguous already; unpack:
//                 chunk i holds my positions of head group i, into heads [i·Hp, (i+1)·Hp) of out.
//
// Glossary: p ranks, Tl positions per rank, T = p·Tl, H heads, Hp = H/p, hs head size.
#include "labs/ulysses_all_to_all/ulysses_all_to_all.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace llmp::lab {
namespace {

void check_3d(const Tensor& t, const char* fn, const char* name, const char* dims) {
  if (t.ndim() != 3)
    throw std::invalid_argument(std::string(fn) + ": " + name + " has " +
                                std::to_string(t.ndim()) + " dimensions, want 3 " + dims);
}

// Copies (rows, heads, hs) blocks between a tensor of `from_heads` heads per row and one of
// `to_heads`: heads [from_h0, from_h0 + n) of each row to heads [to_h0, to_h0 + n).
void copy_heads(const float* from, int64_t from_heads, int64_t from_h0, float* to,
                int64_t to_heads, int64_t to_h0, int64_t rows, int64_t n, int64_t hs) {
  for (int64_t t = 0; t < rows; ++t)
    std::memcpy(to + (t * to_heads + to_h0) * hs, from + (t * from_heads + from_h0) * hs,
                sizeof(float) * n * hs);
}

}  // namespace

Tensor seq_to_heads(ProcessGroup& cp, const Tensor& x) {
  check_3d(x, "seq_to_heads", "x", "(Tl, H, hs)");
  const int64_t p = cp.size(), Tl = x.dim(0), H = x.dim(1), hs = x.dim(2);
  if (H % p != 0)
    throw std::invalid_argument("seq_to_heads: H = " + std::to_string(H) +
                                " heads, not divisible by p = " + std::to_string(p));
  const int64_t Hp = H / p, chunk = Tl * Hp * hs;
  Tensor send = Tensor::empty({p * chunk}, DType::kF32, MemCategory::kCommBuffers);
  for (int64_t j = 0; j < p; ++j)  // chunk j: my positions of head group j
    copy_heads(x.f32(), H, j * Hp, send.f32() + j * chunk, Hp, 0, Tl, Hp, hs);
  Tensor out = Tensor::empty({p * Tl, Hp, hs}, DType::kF32, MemCategory::kActivations);
  Tensor flat = out.view({p * chunk});
  cp.all_to_all(send, flat);  // chunk i = rank i's positions: rows [i·Tl, (i+1)·Tl) already
  return out;
}

Tensor heads_to_seq(ProcessGroup& cp, const Tensor& y) {
  check_3d(y, "heads_to_seq", "y", "(T, Hp, hs)");
  const int64_t p = cp.size(), T = y.dim(0), Hp = y.dim(1), hs = y.dim(2);
  if (T % p != 0)
    throw std::invalid_argument("heads_to_seq: T = " + std::to_string(T) +
                                " positions, not divisible by p = " + std::to_string(p));
  const int64_t Tl = T / p, chunk = Tl * Hp * hs;
  Tensor recv = Tensor::empty({p * chunk}, DType::kF32, MemCategory::kCommBuffers);
  cp.all_to_all(y.view({p * chunk}), recv);  // chunk j = rows [j·Tl, (j+1)·Tl): contiguous
  Tensor out = Tensor::empty({Tl, p * Hp, hs}, DType::kF32, MemCategory::kActivations);
  for (int64_t i = 0; i < p; ++i)  // chunk i: my positions of head group i
    copy_heads(recv.f32() + i * chunk, Hp, 0, out.f32(), p * Hp, i * Hp, Tl, Hp, hs);
  return out;
}

Tensor ulysses_attention(ProcessGroup& cp, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttendFn& attend) {
  // q, k, v in this order on every rank: each declarator is sequenced before the next (the
  // arguments of one call are not; their order is the compiler's to choose).
  const Tensor qh = seq_to_heads(cp, q), kh = seq_to_heads(cp, k), vh = seq_to_heads(cp, v);
  return heads_to_seq(cp, attend(qh, kh, vh));
}

}  // namespace llmp::lab
