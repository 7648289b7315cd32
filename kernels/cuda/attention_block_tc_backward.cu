// Tensor-core blockwise attention, the backward (attention_block_tc.h): a dQ pass over query
// tiles and a dK|dV pass over key tiles, each recomputing S and dP on tensor cores (wmma_tiles.h)
// with P = e^(S − lse) and dS = P (dP − D)/√hs between the products.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/attention_block_tc.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/flash_tiles.h"
#include "kernels/cuda/wmma_tiles.h"

namespace llmp {
namespace cuda {
namespace {

using namespace tc;  // NOLINT: this file's building blocks (wmma_tiles.h)

// ---- backward, pass 1: dQ of 64 query rows over the key tiles they see ----
template <int HS>
__global__ void __launch_bounds__(kTcThreads)
    backward_dq_kernel(float* dq, const float* q, int ld_q, const float* k, const float* v,
                       int ld_kv, const float* dout, int ld_o, const float* lse, const float* D,
                       int H, int Tl, cpu::BlockPairs pairs, float scale) {
  using L = Smem<HS>;
  extern __shared__ __align__(128) unsigned char smem[];
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
  extern __shared__ __align__(128) unsigned char smem[];
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

/// Both passes for head size HS, on stream().
template <int HS>
void backward_hs(float* dq, float* dk, float* dv, int ld_dkv, const float* q, int ld_q,
                 const float* k, const float* v, int ld_kv, const float* dout, int ld_o,
                 const float* lse, const float* D, int B, int H, int Tl, cpu::BlockPairs pairs) {
  static bool ready_dq = false, ready_dkv = false;
  allow_smem(backward_dq_kernel<HS>, Smem<HS>::dq, &ready_dq);
  allow_smem(backward_dkv_kernel<HS>, Smem<HS>::dkv, &ready_dkv);
  const dim3 grid((Tl + kT - 1) / kT, B * H);
  const float scale = 1.0f / std::sqrt(float(HS));
  backward_dq_kernel<HS><<<grid, kTcThreads, Smem<HS>::dq, stream()>>>(
      dq, q, ld_q, k, v, ld_kv, dout, ld_o, lse, D, H, Tl, pairs, scale);
  LLMP_LAUNCH_CHECK();
  backward_dkv_kernel<HS><<<grid, kTcThreads, Smem<HS>::dkv, stream()>>>(
      dk, dv, ld_dkv, q, ld_q, k, v, ld_kv, dout, ld_o, lse, D, H, Tl, pairs, scale);
  LLMP_LAUNCH_CHECK();
}

/// The largest of the three kernels' shared memory for head size hs (0: not a supported hs).
}  // namespace

void attention_block_backward_tc(float* dq, float* dk, float* dv, int ld_dkv, const float* q,
                                 int ld_q, const float* k, const float* v, int ld_kv,
                                 const float* dout, int ld_o, const float* lse, const float* D,
                                 int B, int H, int Tl, int hs, cpu::BlockPairs pairs) {
  if (int64_t{B} * H * Tl <= 0) return;
#define LLMP_BACKWARD_HS(N)                                                                       \
  case N:                                                                                         \
    return backward_hs<N>(dq, dk, dv, ld_dkv, q, ld_q, k, v, ld_kv, dout, ld_o, lse, D, B, H, Tl, \
                          pairs)
  switch (hs) {
    LLMP_BACKWARD_HS(16);
    LLMP_BACKWARD_HS(32);
    LLMP_BACKWARD_HS(64);
    LLMP_BACKWARD_HS(128);
    default:
      break;
  }
#undef LLMP_BACKWARD_HS
  std::fprintf(stderr, "attention_block_backward_tc: head size %d is none of 16, 32, 64, 128\n",
               hs);
  std::exit(1);
}

}  // namespace cuda
}  // namespace llmp
