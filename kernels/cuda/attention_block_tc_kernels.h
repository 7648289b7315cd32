// The tensor-core blockwise attention's three kernels (attention_block_tc.h says what they
// compute and when they run): the forward, and the backward's dQ pass and dK|dV pass. Device
// code in a header so that two compilers build it: nvcc for the GPU (attention_block_tc.cu
// launches them), and g++ with the CPU emulator (device_lang.h), where
// attention_block_tc_emulated_test runs these very kernels against the kernels/cpu twins.
//
// Each kernel: a block of kTcThreads (4 warps) per 64-row tile of one (b, h) (blockIdx.x the
// tile, blockIdx.y = b·H + h), Smem<HS>'s dynamic shared memory (wmma_tiles.h), scale = 1/√hs.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/attention_block.h"
#include "kernels/cuda/device_lang.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/flash_tiles.h"
#include "kernels/cuda/wmma_tiles.h"

namespace llmp {
namespace cuda {
namespace tc {

/// Every kernel's grid: a block per 64-row tile (x) and per (b, h) (y = b·H + h).
inline dim3 tile_grid(int B, int H, int Tl) { return dim3((Tl + kT - 1) / kT, B * H); }
/// The scale of S = Q Kᵀ: 1/√hs.
inline float score_scale(int hs) { return 1.0f / std::sqrt(static_cast<float>(hs)); }

// ---- forward: m, l, O of 64 query rows continued over the key tiles they see ----
template <int HS>
__global__ void __launch_bounds__(kTcThreads)
    forward_kernel(float* o, int ld_o, float* m, float* l, const float* q, int ld_q, const float* k,
                   const float* v, int ld_kv, int H, int Tl, cpu::BlockPairs pairs, float scale) {
  using L = Smem<HS>;
  LLMP_DYNAMIC_SMEM(smem);
  Carve cut{smem};
  bf16* sq = cut.take<bf16>(L::tile16);
  bf16* sk = cut.take<bf16>(L::tile16);
  bf16* sv = cut.take<bf16>(L::tile16);
  float* so = cut.take<float>(L::tile32);
  float* scratch = cut.take<float>(L::fwd_scratch);
  bf16* sp = cut.take<bf16>(L::warps16);
  float* sm = cut.take<float>(L::rows);
  float* sl = cut.take<float>(L::rows);
  float* salpha = cut.take<float>(L::rows);

  const BlockAt tile = block_at(H, Tl);
  const int b = tile.b, h = tile.h, i0 = tile.r0, i1 = tile.r1, c = tile.c, warp = tile.warp,
            lane = tile.lane;
  load_bf16<HS>(sq, q, ld_q, b, h, i0, Tl);
  load_f32<HS>(so, o, ld_o, b, h, i0, Tl);
  load_stat(sm, m, tile.row0, i0, Tl, -INFINITY);
  load_stat(sl, l, tile.row0, i0, Tl, 0.0f);
  float* S = scratch + warp * kR * L::kSld;  // this warp's 16 rows: S, then P~V
  bf16* P = sp + warp * kR * kT;
  for (int j0 = 0; j0 < Tl; j0 += kT) {
    const int j1 = j0 + kT < Tl ? j0 + kT : Tl;
    if (!tile_sees(pairs, i0, i1, j0, j1, c)) continue;  // the same for every thread
    __syncthreads();  // the last tile's K, V are read (and the loads above are visible)
    load_bf16<HS>(sk, k, ld_kv, b, h, j0, Tl);
    load_bf16<HS>(sv, v, ld_kv, b, h, j0, Tl);
    __syncthreads();
    warp_abt<HS, kT>(S, L::kSld, sq + warp * kR * HS, HS, sk, HS);  // S = Q Kᵀ (unscaled)
    __syncwarp();
    for (int r = 0; r < kR; ++r) {  // the online softmax of row r: lanes over the 64 keys
      const int row = warp * kR + r, i = i0 + row;
      float s[kT / kWarp];
      float mx = -INFINITY;
#pragma unroll
      for (int t = 0; t < kT / kWarp; ++t) {
        const int col = lane + t * kWarp, j = j0 + col;
        const bool on = i < Tl && j < Tl && sees(pairs, i, j, c);
        s[t] = on ? S[r * L::kSld + col] * scale : -INFINITY;
        mx = fmaxf(mx, s[t]);
      }
      mx = warp_max(mx);
      const float m_old = sm[row], m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
#pragma unroll
      for (int t = 0; t < kT / kWarp; ++t) {
        const float p = s[t] == -INFINITY ? 0.0f : expf(s[t] - m_new);  // P~ = e^(S − m')
        sum += p;
        P[r * kT + lane + t * kWarp] = __float2bfloat16(p);
      }
      sum = warp_sum(sum);  // every lane has read m_old before lane 0 writes below
      if (lane == 0) {
        const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);  // 0 from m = −∞
        salpha[row] = alpha;
        sl[row] = alpha * sl[row] + sum;
        sm[row] = m_new;
      }
    }
    __syncwarp();
    warp_ab<kT, HS>(S, L::kSld, P, kT, sv, HS, /*accumulate=*/false);  // P~ V
    __syncwarp();
    for (int e = lane; e < kR * HS; e += kWarp) {  // O = α O + P~ V
      const int r = e / HS, row = warp * kR + r;
      so[row * HS + e % HS] = salpha[row] * so[row * HS + e % HS] + S[r * L::kSld + e % HS];
    }
  }
  __syncthreads();
  store_f32<HS>(o, ld_o, so, b, h, i0, Tl);
  for (int r = threadIdx.x; r < kT; r += kTcThreads)
    if (i0 + r < Tl) {
      m[tile.row0 + i0 + r] = sm[r];
      l[tile.row0 + i0 + r] = sl[r];
    }
}

// ---- backward, pass 1: dQ of 64 query rows over the key tiles they see ----
template <int HS>
__global__ void __launch_bounds__(kTcThreads)
    backward_dq_kernel(float* dq, const float* q, int ld_q, const float* k, const float* v,
                       int ld_kv, const float* dout, int ld_o, const float* lse, const float* D,
                       int H, int Tl, cpu::BlockPairs pairs, float scale) {
  using L = Smem<HS>;
  LLMP_DYNAMIC_SMEM(smem);
  Carve cut{smem};
  bf16* sq = cut.take<bf16>(L::tile16);
  bf16* sdo = cut.take<bf16>(L::tile16);
  bf16* sk = cut.take<bf16>(L::tile16);
  bf16* sv = cut.take<bf16>(L::tile16);
  float* sdq = cut.take<float>(L::tile32);
  float* ss = cut.take<float>(L::warps32);
  float* sdp = cut.take<float>(L::warps32);
  bf16* sds = cut.take<bf16>(L::warps16);
  float* slse = cut.take<float>(L::rows);
  float* sD = cut.take<float>(L::rows);

  const BlockAt tile = block_at(H, Tl);
  const int b = tile.b, h = tile.h, i0 = tile.r0, i1 = tile.r1, c = tile.c, warp = tile.warp,
            lane = tile.lane;
  load_bf16<HS>(sq, q, ld_q, b, h, i0, Tl);
  load_bf16<HS>(sdo, dout, ld_o, b, h, i0, Tl);
  load_f32<HS>(sdq, dq, ld_q, b, h, i0, Tl);  // dq shares q's row stride (attention_block.h)
  load_stat(slse, lse, tile.row0, i0, Tl, 0.0f);
  load_stat(sD, D, tile.row0, i0, Tl, 0.0f);
  float* S = ss + warp * kR * kT;
  float* dP = sdp + warp * kR * kT;
  bf16* dS = sds + warp * kR * kT;
  for (int j0 = 0; j0 < Tl; j0 += kT) {
    const int j1 = j0 + kT < Tl ? j0 + kT : Tl;
    if (!tile_sees(pairs, i0, i1, j0, j1, c)) continue;
    __syncthreads();
    load_bf16<HS>(sk, k, ld_kv, b, h, j0, Tl);
    load_bf16<HS>(sv, v, ld_kv, b, h, j0, Tl);
    __syncthreads();
    warp_abt<HS, kT>(S, kT, sq + warp * kR * HS, HS, sk, HS);    // S = Q Kᵀ
    warp_abt<HS, kT>(dP, kT, sdo + warp * kR * HS, HS, sv, HS);  // dP = dO Vᵀ
    __syncwarp();
    for (int e = lane; e < kR * kT; e += kWarp) {  // dS = P (dP − D)/√hs, P = e^(S − lse)
      const int r = e / kT, row = warp * kR + r, i = i0 + row, j = j0 + e % kT;
      const bool on = i < Tl && j < Tl && sees(pairs, i, j, c);
      const float p = on ? expf(S[e] * scale - slse[row]) : 0.0f;
      dS[e] = __float2bfloat16(p * (dP[e] - sD[row]) * scale);
    }
    __syncwarp();
    warp_ab<kT, HS>(sdq + warp * kR * HS, HS, dS, kT, sk, HS, /*accumulate=*/true);  // += dS K
  }
  __syncthreads();
  store_f32<HS>(dq, ld_q, sdq, b, h, i0, Tl);
}

// ---- backward, pass 2: dK, dV of 64 key rows over the query tiles that see them ----
template <int HS>
__global__ void __launch_bounds__(kTcThreads)
    backward_dkv_kernel(float* dk, float* dv, int ld_dkv, const float* q, int ld_q, const float* k,
                        const float* v, int ld_kv, const float* dout, int ld_o, const float* lse,
                        const float* D, int H, int Tl, cpu::BlockPairs pairs, float scale) {
  using L = Smem<HS>;
  LLMP_DYNAMIC_SMEM(smem);
  Carve cut{smem};
  bf16* sk = cut.take<bf16>(L::tile16);
  bf16* sv = cut.take<bf16>(L::tile16);
  bf16* sq = cut.take<bf16>(L::tile16);
  bf16* sdo = cut.take<bf16>(L::tile16);
  float* sdk = cut.take<float>(L::tile32);
  float* sdv = cut.take<float>(L::tile32);
  float* sst = cut.take<float>(L::warps32);
  float* sdpt = cut.take<float>(L::warps32);
  bf16* spt = cut.take<bf16>(L::warps16);
  bf16* sdst = cut.take<bf16>(L::warps16);
  float* slse = cut.take<float>(L::rows);
  float* sD = cut.take<float>(L::rows);

  const BlockAt tile = block_at(H, Tl);
  const int b = tile.b, h = tile.h, j0 = tile.r0, j1 = tile.r1, c = tile.c, warp = tile.warp,
            lane = tile.lane;
  load_bf16<HS>(sk, k, ld_kv, b, h, j0, Tl);
  load_bf16<HS>(sv, v, ld_kv, b, h, j0, Tl);
  load_f32<HS>(sdk, dk, ld_dkv, b, h, j0, Tl);
  load_f32<HS>(sdv, dv, ld_dkv, b, h, j0, Tl);
  float* St = sst + warp * kR * kT;  // this warp's 16 keys × 64 queries
  float* dPt = sdpt + warp * kR * kT;
  bf16* Pt = spt + warp * kR * kT;
  bf16* dSt = sdst + warp * kR * kT;
  for (int i0 = 0; i0 < Tl; i0 += kT) {
    const int i1 = i0 + kT < Tl ? i0 + kT : Tl;
    if (!tile_sees(pairs, i0, i1, j0, j1, c)) continue;
    __syncthreads();  // the last query tile is read
    load_bf16<HS>(sq, q, ld_q, b, h, i0, Tl);
    load_bf16<HS>(sdo, dout, ld_o, b, h, i0, Tl);
    load_stat(slse, lse, tile.row0, i0, Tl, 0.0f);
    load_stat(sD, D, tile.row0, i0, Tl, 0.0f);
    __syncthreads();
    warp_abt<HS, kT>(St, kT, sk + warp * kR * HS, HS, sq, HS);    // Sᵀ = K Qᵀ
    warp_abt<HS, kT>(dPt, kT, sv + warp * kR * HS, HS, sdo, HS);  // dPᵀ = V dOᵀ
    __syncwarp();
    for (int e = lane; e < kR * kT; e += kWarp) {
      const int r = e / kT, col = e % kT, j = j0 + warp * kR + r, i = i0 + col;
      const bool on = i < Tl && j < Tl && sees(pairs, i, j, c);
      const float p = on ? expf(St[e] * scale - slse[col]) : 0.0f;
      Pt[e] = __float2bfloat16(p);
      dSt[e] = __float2bfloat16(p * (dPt[e] - sD[col]) * scale);
    }
    __syncwarp();
    warp_ab<kT, HS>(sdv + warp * kR * HS, HS, Pt, kT, sdo, HS, /*accumulate=*/true);  // += Pᵀ dO
    warp_ab<kT, HS>(sdk + warp * kR * HS, HS, dSt, kT, sq, HS, /*accumulate=*/true);  // += dSᵀ Q
  }
  __syncthreads();
  store_f32<HS>(dk, ld_dkv, sdk, b, h, j0, Tl);
  store_f32<HS>(dv, ld_dkv, sdv, b, h, j0, Tl);
}

}  // namespace tc
}  // namespace cuda
}  // namespace llmp
