// Ring attention's blockwise online softmax: one warp per row of one (b, h), lanes over the hs
// channels (see attention_block.h for the launch shape and why).
#include "kernels/cuda/attention_block.h"

#include <cmath>

#include "kernels/cuda/attention_block_tc.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"

namespace llmp {
namespace cuda {
namespace {

using cpu::ChunkPair;

/// Where row i of (b, h) is: r = (b·H + h)·Tl + i indexes m, l, lse, D (B,H,Tl).
struct RowAt {
  int b, h, i;
  int64_t r;
};

__device__ __forceinline__ RowAt row_at(int64_t r, int H, int Tl) {
  const int64_t bh = r / Tl;
  return RowAt{static_cast<int>(bh / H), static_cast<int>(bh % H), static_cast<int>(r % Tl), r};
}

/// Head h's hs floats of row i of sequence b in a (B,Tl,·) buffer with rows of ld floats.
template <typename P>
__device__ __forceinline__ P* head_row(P* base, int b, int i, int h, int ld, int Tl, int hs) {
  return base + (static_cast<int64_t>(b) * Tl + i) * ld + static_cast<int64_t>(h) * hs;
}

/// x·y over hs channels, lanes over channels; every lane gets the sum.
__device__ __forceinline__ float warp_dot(const float* x, const float* y, int hs, int lane) {
  float s = 0.0f;
  for (int e = lane; e < hs; e += kWarp) s += x[e] * y[e];
  return warp_sum(s);
}

/// Keys of a pair that query row o of its chunk sees (kernels/cpu/attention_block.h).
__device__ __forceinline__ int visible(ChunkPair k, int o, int c) {
  return k == ChunkPair::kSkip ? 0 : k == ChunkPair::kDiagonal ? o + 1 : c;
}

// One online-softmax step of query row i (a warp): m, l, O updated with the keys it sees.
__global__ void forward_kernel(float* o, int ld_o, float* m, float* l, const float* q, int ld_q,
                               const float* k, const float* v, int ld_kv, int64_t rows, int H,
                               int Tl, int hs, BlockPairs pairs, float scale) {
  const int64_t w = warp_row(blockIdx.x, threadIdx.x);
  if (w >= rows) return;
  const int lane = threadIdx.x % kWarp, c = Tl / 2;
  const RowAt at = row_at(w, H, Tl);
  const int qi = at.i / c, ro = at.i % c;
  const ChunkPair* kind = pairs.kind[qi];
  if (kind[0] == ChunkPair::kSkip && kind[1] == ChunkPair::kSkip) return;
  const float* qr = head_row(q, at.b, at.i, at.h, ld_q, Tl, hs);
  float* orow = head_row(o, at.b, at.i, at.h, ld_o, Tl, hs);
  float mx = -INFINITY;  // max_j S_ij: lanes over keys
  for (int ki = 0; ki < 2; ++ki)
    for (int j = lane; j < visible(kind[ki], ro, c); j += kWarp) {
      const float* kr = head_row(k, at.b, ki * c + j, at.h, ld_kv, Tl, hs);
      float s = 0.0f;
      for (int e = 0; e < hs; ++e) s += qr[e] * kr[e];
      mx = fmaxf(mx, s * scale);
    }
  mx = warp_max(mx);
  const float m_new = fmaxf(m[at.r], mx);
  const float alpha = expf(m[at.r] - m_new);  // 0 on the first block (m = −∞)
  for (int e = lane; e < hs; e += kWarp) orow[e] *= alpha;  // O = e^(m − m') O ...
  float sum = 0.0f;
  for (int ki = 0; ki < 2; ++ki)
    for (int j = 0; j < visible(kind[ki], ro, c); ++j) {
      const float* kr = head_row(k, at.b, ki * c + j, at.h, ld_kv, Tl, hs);
      const float* vr = head_row(v, at.b, ki * c + j, at.h, ld_kv, Tl, hs);
      const float p = expf(warp_dot(qr, kr, hs, lane) * scale - m_new);  // P~ = exp(S − m')
      sum += p;
      for (int e = lane; e < hs; e += kWarp) orow[e] += p * vr[e];  // ... + P~ V
    }
  if (lane == 0) {
    l[at.r] = alpha * l[at.r] + sum;  // l = e^(m − m') l + rowsum P~
    m[at.r] = m_new;
  }
}

__global__ void finalize_kernel(float* o, int ld_o, float* lse, const float* m, const float* l,
                                int64_t rows, int H, int Tl, int hs) {
  const int64_t w = warp_row(blockIdx.x, threadIdx.x);
  if (w >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const RowAt at = row_at(w, H, Tl);
  float* orow = head_row(o, at.b, at.i, at.h, ld_o, Tl, hs);
  const float inv = 1.0f / l[at.r];
  for (int e = lane; e < hs; e += kWarp) orow[e] *= inv;  // out = O / l
  if (lane == 0) lse[at.r] = m[at.r] + logf(l[at.r]);     // lse = m + log l
}

__global__ void rowdot_kernel(float* D, const float* dout, const float* out, int ld_o,
                              int64_t rows, int H, int Tl, int hs) {
  const int64_t w = warp_row(blockIdx.x, threadIdx.x);
  if (w >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const RowAt at = row_at(w, H, Tl);
  const float d = warp_dot(head_row(dout, at.b, at.i, at.h, ld_o, Tl, hs),
                           head_row(out, at.b, at.i, at.h, ld_o, Tl, hs), hs, lane);
  if (lane == 0) D[at.r] = d;  // D = rowsum(dO ⊙ O)
}

/// P_ij and dS_ij of query row (b, h, i) and key row (b, h, j), recomputed from lse and D.
struct PdS {
  float p, ds;
};
__device__ __forceinline__ PdS p_and_ds(const float* qr, const float* dor, const float* kr,
                                        const float* vr, float lse, float D, int hs, int lane,
                                        float scale) {
  const float p = expf(warp_dot(qr, kr, hs, lane) * scale - lse);  // P = exp(S − lse)
  const float dp = warp_dot(dor, vr, hs, lane);                     // dP = dO·v
  return PdS{p, scale * p * (dp - D)};                              // dS = P (dP − D)/√hs
}

// dQ_i += Σ_j dS_ij k_j: a warp per query row i.
__global__ void backward_dq_kernel(float* dq, const float* q, int ld_q, const float* k,
                                   const float* v, int ld_kv, const float* dout, int ld_o,
                                   const float* lse, const float* D, int64_t rows, int H, int Tl,
                                   int hs, BlockPairs pairs, float scale) {
  const int64_t w = warp_row(blockIdx.x, threadIdx.x);
  if (w >= rows) return;
  const int lane = threadIdx.x % kWarp, c = Tl / 2;
  const RowAt at = row_at(w, H, Tl);
  const int qi = at.i / c, ro = at.i % c;
  const float* qr = head_row(q, at.b, at.i, at.h, ld_q, Tl, hs);
  const float* dor = head_row(dout, at.b, at.i, at.h, ld_o, Tl, hs);
  float* dqr = head_row(dq, at.b, at.i, at.h, ld_q, Tl, hs);
  for (int ki = 0; ki < 2; ++ki)
    for (int j = 0; j < visible(pairs.kind[qi][ki], ro, c); ++j) {
      const float* kr = head_row(k, at.b, ki * c + j, at.h, ld_kv, Tl, hs);
      const float* vr = head_row(v, at.b, ki * c + j, at.h, ld_kv, Tl, hs);
      const PdS g = p_and_ds(qr, dor, kr, vr, lse[at.r], D[at.r], hs, lane, scale);
      for (int e = lane; e < hs; e += kWarp) dqr[e] += g.ds * kr[e];
    }
}

// dV_j += Σ_i P_ij dO_i and dK_j += Σ_i dS_ij q_i: a warp per key row j, over the query rows
// that see it (all c of a full pair, rows o ≥ j's row of a diagonal pair).
__global__ void backward_dkv_kernel(float* dk, float* dv, int ld_dkv, const float* q, int ld_q,
                                    const float* k, const float* v, int ld_kv, const float* dout,
                                    int ld_o, const float* lse, const float* D, int64_t rows,
                                    int H, int Tl, int hs, BlockPairs pairs, float scale) {
  const int64_t w = warp_row(blockIdx.x, threadIdx.x);
  if (w >= rows) return;
  const int lane = threadIdx.x % kWarp, c = Tl / 2;
  const RowAt at = row_at(w, H, Tl);  // at.i: the key row j
  const int kj = at.i / c, ro = at.i % c;
  const float* kr = head_row(k, at.b, at.i, at.h, ld_kv, Tl, hs);
  const float* vr = head_row(v, at.b, at.i, at.h, ld_kv, Tl, hs);
  float* dkr = head_row(dk, at.b, at.i, at.h, ld_dkv, Tl, hs);
  float* dvr = head_row(dv, at.b, at.i, at.h, ld_dkv, Tl, hs);
  const int64_t bh = at.r - at.i;  // (b·H + h)·Tl
  for (int qi = 0; qi < 2; ++qi) {
    const ChunkPair kind = pairs.kind[qi][kj];
    if (kind == ChunkPair::kSkip) continue;
    for (int o = kind == ChunkPair::kDiagonal ? ro : 0; o < c; ++o) {
      const int i = qi * c + o;
      const float* qr = head_row(q, at.b, i, at.h, ld_q, Tl, hs);
      const float* dor = head_row(dout, at.b, i, at.h, ld_o, Tl, hs);
      const PdS g = p_and_ds(qr, dor, kr, vr, lse[bh + i], D[bh + i], hs, lane, scale);
      for (int e = lane; e < hs; e += kWarp) {
        dvr[e] += g.p * dor[e];
        dkr[e] += g.ds * qr[e];
      }
    }
  }
}

float head_scale(int hs) { return 1.0f / std::sqrt(static_cast<float>(hs)); }

}  // namespace

void attention_block_forward(float* o, int ld_o, float* m, float* l, float* /*scores*/,
                             const float* q, int ld_q, const float* k, const float* v, int ld_kv,
                             int B, int H, int Tl, int hs, BlockPairs pairs) {
  const int64_t rows = static_cast<int64_t>(B) * H * Tl;
  if (rows <= 0) return;
  if (attention_block_tc(B, H, hs))  // bf16 operands declared: tensor cores
    return attention_block_forward_tc(o, ld_o, m, l, q, ld_q, k, v, ld_kv, B, H, Tl, hs, pairs);
  forward_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(
      o, ld_o, m, l, q, ld_q, k, v, ld_kv, rows, H, Tl, hs, pairs, head_scale(hs));
  LLMP_LAUNCH_CHECK();
}

void attention_block_finalize(float* o, int ld_o, float* lse, const float* m, const float* l,
                              int B, int H, int Tl, int hs) {
  const int64_t rows = static_cast<int64_t>(B) * H * Tl;
  if (rows <= 0) return;
  finalize_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(o, ld_o, lse, m, l, rows,
                                                                        H, Tl, hs);
  LLMP_LAUNCH_CHECK();
}

void attention_block_rowdot(float* D, const float* dout, const float* out, int ld_o, int B,
                            int H, int Tl, int hs) {
  const int64_t rows = static_cast<int64_t>(B) * H * Tl;
  if (rows <= 0) return;
  rowdot_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(D, dout, out, ld_o, rows,
                                                                      H, Tl, hs);
  LLMP_LAUNCH_CHECK();
}

void attention_block_backward(float* dq, float* dk, float* dv, int ld_dkv, float* /*P*/,
                              float* /*dS*/, const float* q, int ld_q, const float* k,
                              const float* v, int ld_kv, const float* dout, int ld_o,
                              const float* lse, const float* D, int B, int H, int Tl, int hs,
                              BlockPairs pairs) {
  const int64_t rows = static_cast<int64_t>(B) * H * Tl;
  if (rows <= 0) return;
  if (attention_block_tc(B, H, hs))  // bf16 operands declared: tensor cores
    return attention_block_backward_tc(dq, dk, dv, ld_dkv, q, ld_q, k, v, ld_kv, dout, ld_o, lse,
                                       D, B, H, Tl, hs, pairs);
  const float scale = head_scale(hs);
  backward_dq_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(
      dq, q, ld_q, k, v, ld_kv, dout, ld_o, lse, D, rows, H, Tl, hs, pairs, scale);
  LLMP_LAUNCH_CHECK();
  backward_dkv_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream()>>>(
      dk, dv, ld_dkv, q, ld_q, k, v, ld_kv, dout, ld_o, lse, D, rows, H, Tl, hs, pairs, scale);
  LLMP_LAUNCH_CHECK();
}

void copy_columns(float* dst, int ld_dst, const float* src, int ld_src, int64_t rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  CUDA_CHECK(cudaMemcpy2DAsync(dst, sizeof(float) * ld_dst, src, sizeof(float) * ld_src,
                               sizeof(float) * cols, static_cast<size_t>(rows),
                               cudaMemcpyDeviceToDevice, stream()));
}

}  // namespace cuda
}  // namespace llmp
