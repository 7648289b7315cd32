// Tensor-core blockwise attention: the launches of its three kernels
// (attention_block_tc_kernels.h) and the switch (attention_block_tc.h).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/attention_block_tc.h"
#include "kernels/cuda/attention_block_tc_kernels.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/wmma_tiles.h"

namespace llmp {
namespace cuda {
namespace {

using namespace tc;  // NOLINT: the kernels and their layouts (attention_block_tc_kernels.h)

/// Opts `kernel` in to `bytes` of dynamic shared memory (over the 48 KiB default), once.
template <typename Kernel>
void allow_smem(Kernel kernel, size_t bytes, bool* done) {
  if (*done) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)));
  *done = true;
}

template <int HS>
void forward_hs(float* o, int ld_o, float* m, float* l, const float* q, int ld_q, const float* k,
                const float* v, int ld_kv, int B, int H, int Tl, cpu::BlockPairs pairs) {
  static bool ready = false;
  allow_smem(forward_kernel<HS>, Smem<HS>::forward, &ready);
  forward_kernel<HS><<<tile_grid(B, H, Tl), kTcThreads, Smem<HS>::forward, stream()>>>(
      o, ld_o, m, l, q, ld_q, k, v, ld_kv, H, Tl, pairs, score_scale(HS));
  LLMP_LAUNCH_CHECK();
}

/// Both passes for head size HS, on stream().
template <int HS>
void backward_hs(float* dq, float* dk, float* dv, int ld_dkv, const float* q, int ld_q,
                 const float* k, const float* v, int ld_kv, const float* dout, int ld_o,
                 const float* lse, const float* D, int B, int H, int Tl, cpu::BlockPairs pairs) {
  static bool ready_dq = false, ready_dkv = false;
  allow_smem(backward_dq_kernel<HS>, Smem<HS>::dq, &ready_dq);
  allow_smem(backward_dkv_kernel<HS>, Smem<HS>::dkv, &ready_dkv);
  const dim3 grid = tile_grid(B, H, Tl);
  const float scale = score_scale(HS);
  backward_dq_kernel<HS><<<grid, kTcThreads, Smem<HS>::dq, stream()>>>(
      dq, q, ld_q, k, v, ld_kv, dout, ld_o, lse, D, H, Tl, pairs, scale);
  LLMP_LAUNCH_CHECK();
  backward_dkv_kernel<HS><<<grid, kTcThreads, Smem<HS>::dkv, stream()>>>(
      dk, dv, ld_dkv, q, ld_q, k, v, ld_kv, dout, ld_o, lse, D, H, Tl, pairs, scale);
  LLMP_LAUNCH_CHECK();
}

/// The largest of the three kernels' shared memory for head size hs (0: not a supported hs).
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
