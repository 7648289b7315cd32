// Tensor-core blockwise attention, the forward and the switch (attention_block_tc.h): WMMA bf16
// fragments for the products (wmma_tiles.h), shared memory for the tiles and the row-wise online
// softmax between them. The backward: attention_block_tc_backward.cu.
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

// ---- forward: m, l, O of 64 query rows continued over the key tiles they see ----
template <int HS>
__global__ void __launch_bounds__(kTcThreads)
    forward_kernel(float* o, int ld_o, float* m, float* l, const float* q, int ld_q, const float* k,
                   const float* v, int ld_kv, int H, int Tl, cpu::BlockPairs pairs, float scale) {
  using L = Smem<HS>;
  extern __shared__ __align__(128) unsigned char smem[];
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

template <int HS>
void forward_hs(float* o, int ld_o, float* m, float* l, const float* q, int ld_q, const float* k,
                const float* v, int ld_kv, int B, int H, int Tl, cpu::BlockPairs pairs) {
  static bool ready = false;
  allow_smem(forward_kernel<HS>, Smem<HS>::forward, &ready);
  const dim3 grid((Tl + kT - 1) / kT, B * H);
  forward_kernel<HS><<<grid, kTcThreads, Smem<HS>::forward, stream()>>>(
      o, ld_o, m, l, q, ld_q, k, v, ld_kv, H, Tl, pairs, 1.0f / std::sqrt(float(HS)));
  LLMP_LAUNCH_CHECK();
}

size_t smem_bytes(int hs) {
  auto most = [](size_t a, size_t b, size_t c) {
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
  };
  switch (hs) {
    case 16:
      return most(Smem<16>::forward, Smem<16>::dq, Smem<16>::dkv);
    case 32:
      return most(Smem<32>::forward, Smem<32>::dq, Smem<32>::dkv);
    case 64:
      return most(Smem<64>::forward, Smem<64>::dq, Smem<64>::dkv);
    case 128:
      return most(Smem<128>::forward, Smem<128>::dq, Smem<128>::dkv);
    default:
      return 0;
  }
}

}  // namespace

bool attention_block_tc(int B, int H, int hs) {
  static const bool forced_off = [] {
    const char* e = std::getenv("LLMP_CUDA_BLOCKWISE_CUDA_CORES");
    return e != nullptr && std::strcmp(e, "0") != 0;
  }();
  if (forced_off || sixteen_bit_operands() != CUDA_R_16BF) return false;
  if (int64_t{B} * H >= 65536) return false;  // gridDim.y
  const size_t bytes = smem_bytes(hs);
  if (bytes == 0) return false;
  static const int limit = [] {
    int dev = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return optin;
  }();
  return bytes <= static_cast<size_t>(limit);
}

void attention_block_forward_tc(float* o, int ld_o, float* m, float* l, const float* q, int ld_q,
                                const float* k, const float* v, int ld_kv, int B, int H, int Tl,
                                int hs, cpu::BlockPairs pairs) {
  if (int64_t{B} * H * Tl <= 0) return;
  switch (hs) {
    case 16:
      return forward_hs<16>(o, ld_o, m, l, q, ld_q, k, v, ld_kv, B, H, Tl, pairs);
    case 32:
      return forward_hs<32>(o, ld_o, m, l, q, ld_q, k, v, ld_kv, B, H, Tl, pairs);
    case 64:
      return forward_hs<64>(o, ld_o, m, l, q, ld_q, k, v, ld_kv, B, H, Tl, pairs);
    case 128:
      return forward_hs<128>(o, ld_o, m, l, q, ld_q, k, v, ld_kv, B, H, Tl, pairs);
    default:
      break;
  }
  std::fprintf(stderr, "attention_block_forward_tc: head size %d is none of 16, 32, 64, 128\n", hs);
  std::exit(1);
}

}  // namespace cuda
}  // namespace llmp
