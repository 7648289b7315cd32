// Lab ring_attention, reference solution (for instructors; students start from ../starter.cc).
//
// Ring attention's forward (Liu et al. 2023, §3) with FlashAttention's online softmax (Dao et al.
// 2022, Algorithm 1): per query row the max m of the scores seen so far, the sum l of exp(s − m)
// and the accumulator acc = Σ exp(s − m) v, while the other ranks' K|V blocks arrive one per ring
// step. A block that raises m to m' rescales what was summed by exp(m − m'), so at the end
// acc / l is the softmax over every key, though no row ever held all its scores.
//
// Glossary: p ranks, r this rank, Tl rows per rank, hs head size, src the rank whose block a step
// holds, q0 / k0 the global positions of the first query row / key, m / l / acc as above.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <memory>
#include <vector>

#include "common/runtime/check.h"
#include "labs/ring_attention/ring_attention.h"

namespace llmp {
namespace {

bool host_f32(const Tensor& t, std::vector<int64_t> shape) {
  return t.device() == Device::kCPU && t.dtype() == DType::kF32 && t.shape() == shape;
}

// Folds one K|V block (rows of global positions k0 .. k0+Tl-1) into the running row statistics.
void fold_block(const float* q, const float* kv, int64_t Tl, int64_t hs, bool causal, int64_t q0,
                int64_t k0, std::vector<float>& m, std::vector<float>& l,
                std::vector<float>& acc) {
  const float *kb = kv, *vb = kv + Tl * hs;  // (Tl, hs) each: the block's keys and values
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::vector<float> s(Tl);  // one row's scores against the block
  for (int64_t i = 0; i < Tl; ++i) {
    // Causal: row q0+i sees keys k0+j ≤ q0+i only. None of the block: the row is left as it is
    // (m may still be −inf: computing exp(−inf − (−inf)) would make it NaN).
    const int64_t seen = causal ? std::min<int64_t>(Tl, q0 + i - k0 + 1) : Tl;
    if (seen <= 0) continue;
    float block_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < seen; ++j) {
      float dot = 0;
      for (int64_t c = 0; c < hs; ++c) dot += q[i * hs + c] * kb[j * hs + c];
      s[j] = dot * scale;
      block_max = std::max(block_max, s[j]);
    }
    const float m_new = std::max(m[i], block_max);
    const float rescale = std::exp(m[i] - m_new);  // exp(−inf) = 0 for the first block seen
    float* a = &acc[i * hs];
    l[i] *= rescale;
    for (int64_t c = 0; c < hs; ++c) a[c] *= rescale;
    for (int64_t j = 0; j < seen; ++j) {
      const float e = std::exp(s[j] - m_new);  // ≤ 1: no overflow however large the scores
      l[i] += e;
      for (int64_t c = 0; c < hs; ++c) a[c] += e * vb[j * hs + c];
    }
    m[i] = m_new;
  }
}

}  // namespace

void ring_attention_forward(ProcessGroup& group, const Tensor& q, const Tensor& k, const Tensor& v,
                            bool causal, Tensor& out, Tensor& lse) {
  const int64_t Tl = q.ndim() == 2 ? q.dim(0) : 0, hs = q.ndim() == 2 ? q.dim(1) : 0;
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &v, &out})
    LLMP_CHECK(host_f32(*t, {Tl, hs}), "want host f32 " + q.describe() + ", got " + t->describe());
  LLMP_CHECK(host_f32(lse, {Tl}), "lse must be host f32 (" + std::to_string(Tl) + "), got " +
                                      lse.describe());
  const int p = group.size(), r = group.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  // Two K|V buffers: the block computed with, and the one arriving meanwhile.
  Tensor held = Tensor::empty({2 * Tl * hs}), next = Tensor::empty({2 * Tl * hs});
  held.narrow(0, Tl * hs).copy_from(k.view({Tl * hs}));
  held.narrow(Tl * hs, Tl * hs).copy_from(v.view({Tl * hs}));

  std::vector<float> m(Tl, -std::numeric_limits<float>::infinity()), l(Tl, 0.0f),
      acc(Tl * hs, 0.0f);
  for (int s = 0; s < p; ++s) {
    // Start passing the block on before computing with it: the transfer overlaps the compute.
    std::shared_ptr<Work> recv, send;
    if (s < p - 1) {
      recv = group.irecv(next, left);
      send = group.isend(held, right);
    }
    const int src = ((r - s) % p + p) % p;  // whose block this is
    fold_block(q.f32(), held.f32(), Tl, hs, causal, r * Tl, src * Tl, m, l, acc);
    if (s == p - 1) break;
    recv->wait();
    send->wait();  // `held` may be overwritten only once it has been sent
    std::swap(held, next);
  }
  for (int64_t i = 0; i < Tl; ++i) {
    for (int64_t c = 0; c < hs; ++c) out.f32()[i * hs + c] = acc[i * hs + c] / l[i];
    lse.f32()[i] = m[i] + std::log(l[i]);
  }
}

}  // namespace llmp
