// The CUDA emulator (block_runner.h, cuda_emulator.h, wmma.h) on small kernels written here the
// way the project's kernels are: what a GPU would compute, and the errors a GPU would hang or
// race on reported by name. Built on :emulator, which defines LLMP_CUDA_EMULATOR (device_lang.h).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/device_lang.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/wmma_tiles.h"

namespace llmp::cuda {
namespace {

/// The message launch() threw, or "" when it ran through.
std::string launch_error(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body) {
  try {
    emu::launch(grid, block, smem, body);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

__global__ void write_global_index(int* out) {
  const int block = blockIdx.y * gridDim.x + blockIdx.x;
  out[block * blockDim.x + threadIdx.x] = block * blockDim.x + threadIdx.x;
}

TEST(CudaEmulator, EveryThreadOfEveryBlockRunsOnce) {
  std::vector<int> out(3 * 2 * 64, -1);
  emu::launch(dim3(3, 2), dim3(64), 0, [&] { write_global_index(out.data()); });
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<int>(i));
}

__global__ void sums(float* warp_out, float* block_out) {
  const float x = static_cast<float>(threadIdx.x);
  warp_out[threadIdx.x] = warp_sum(x);
  block_out[threadIdx.x] = block_sum(x);
}

TEST(CudaEmulator, WarpAndBlockSumsOfDeviceUtil) {
  std::vector<float> w(kThreads), b(kThreads);
  emu::launch(dim3(1), dim3(kThreads), 0, [&] { sums(w.data(), b.data()); });
  for (int t = 0; t < kThreads; ++t) {
    const int w0 = t / kWarp * kWarp;
    EXPECT_EQ(w[t], 32.0f * w0 + 31 * 32 / 2) << "thread " << t;
    EXPECT_EQ(b[t], 255.0f * 256 / 2) << "thread " << t;
  }
}

__global__ void shuffles(int* x, int* down, int* from3) {
  const int lane = threadIdx.x % 32;
  x[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, lane, 1);
  down[threadIdx.x] = __shfl_down_sync(0xFFFFFFFFu, lane, 4);
  from3[threadIdx.x] = __shfl_sync(0xFFFFFFFFu, 10 * lane, 3);
}

TEST(CudaEmulator, ShufflesTakeThePartnersValue) {
  std::vector<int> x(64), down(64), from3(64);
  emu::launch(dim3(1), dim3(64), 0, [&] { shuffles(x.data(), down.data(), from3.data()); });
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(x[t], lane ^ 1);
    EXPECT_EQ(down[t], lane + 4 < 32 ? lane + 4 : lane);  // past the warp: its own value
    EXPECT_EQ(from3[t], 30);
  }
}

__global__ void neighbour(float* out, bool barrier) {
  LLMP_DYNAMIC_SMEM(smem);
  float* buf = reinterpret_cast<float*>(smem);
  const int t = threadIdx.x, n = blockDim.x;
  buf[t] = static_cast<float>(t);
  if (barrier) __syncthreads();
  out[t] = buf[(t + 1) % n];
}

// Each thread runs to its next barrier before the next thread starts: without the barrier,
// thread t reads its neighbour's slot before the neighbour wrote it, and shared memory starts
// as NaN, so the race shows every time.
TEST(CudaEmulator, AMissingSyncthreadsReadsUnwrittenSharedMemory) {
  std::vector<float> out(64);
  emu::launch(dim3(1), dim3(64), 64 * 4, [&] { neighbour(out.data(), true); });
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], (t + 1) % 64);
  emu::launch(dim3(1), dim3(64), 64 * 4, [&] { neighbour(out.data(), false); });
  EXPECT_TRUE(std::isnan(out[0])) << "thread 0 read slot 1 before thread 1 wrote it";
  EXPECT_EQ(out[63], 0.0f) << "thread 63 read slot 0, which thread 0 wrote earlier";
}

// Two block reductions through one __shared__ array, as a softmax makes its row max and then its
// sum: the second writes the array again, so a barrier must separate the first one's reads from
// the second one's writes. 64 threads, 2 warps: m = 63, the sum of 64 ones = 64.
__global__ void max_then_sum(float* out, bool second_barrier) {
  __shared__ float partial[2];
  const int t = threadIdx.x;
  const float v = warp_max(static_cast<float>(t));
  if (t % 32 == 0) partial[t / 32] = v;
  __syncthreads();
  const float m = fmaxf(partial[0], partial[1]);
  if (second_barrier) __syncthreads();
  const float s = warp_sum(1.0f);
  if (t % 32 == 0) partial[t / 32] = s;
  __syncthreads();
  out[t] = m + partial[0] + partial[1];
}

// Each warp runs to its next __syncthreads() before the next starts: without the second
// barrier the first warp to run writes its partial sum over a partial max that the other warp
// has not read yet, as a warp that runs ahead does on a GPU (shuffles alone do not hold it).
TEST(CudaEmulator, AWarpRunsAheadToTheNextSyncthreads) {
  std::vector<float> out(64);
  emu::launch(dim3(1), dim3(64), 0, [&] { max_then_sum(out.data(), true); });
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], 63.0f + 64.0f) << "thread " << t;
  emu::launch(dim3(1), dim3(64), 0, [&] { max_then_sum(out.data(), false); });
  int wrong = 0;
  for (int t = 0; t < 64; ++t) wrong += out[t] != 63.0f + 64.0f;
  EXPECT_EQ(wrong, 32) << "one warp read a partial sum as a partial max";
}

__global__ void divergent_barrier() {
  if (threadIdx.x < 32) __syncthreads();
}
__global__ void divergent_syncwarp() {
  if (threadIdx.x % 32 == 0) __syncwarp();
  __syncwarp();
}

TEST(CudaEmulator, BarriersNotEveryThreadReachesAreErrors) {
  const std::string block = launch_error(dim3(1), dim3(64), 0, [] { divergent_barrier(); });
  EXPECT_NE(block.find("__syncthreads() not reached by every thread"), std::string::npos) << block;
  const std::string warp = launch_error(dim3(1), dim3(32), 0, [] { divergent_syncwarp(); });
  EXPECT_NE(warp.find("not reached by every lane"), std::string::npos) << warp;
  const std::string smem =
      launch_error(dim3(1), dim3(32), emu::kMaxDynamicSmem + 1, [] { divergent_barrier(); });
  EXPECT_NE(smem.find("bytes of dynamic shared memory"), std::string::npos) << smem;
}

/// C (16 × 16) = A (16 × 32) · B (32 × 16) with wmma_tiles.h's warp helpers: warp_ab reading B
/// row-major, warp_abt reading Bᵀ stored as (16 × 32) row-major, and warp_ab accumulating.
__global__ void products(float* ab, float* abt, float* twice, const tc::bf16* A, const tc::bf16* B,
                         const tc::bf16* Bt) {
  tc::warp_ab<32, 16>(ab, 16, A, 32, B, 16, /*accumulate=*/false);
  tc::warp_abt<32, 16>(abt, 16, A, 32, Bt, 32);
  tc::warp_ab<32, 16>(twice, 16, A, 32, B, 16, /*accumulate=*/false);
  __syncwarp();
  tc::warp_ab<32, 16>(twice, 16, A, 32, B, 16, /*accumulate=*/true);
}

TEST(CudaEmulator, WmmaProductsOfWmmaTilesAreExactOnSmallIntegers) {
  alignas(128) tc::bf16 A[16 * 32], B[32 * 16], Bt[16 * 32];
  std::vector<float> a(16 * 32), b(32 * 16);
  for (int i = 0; i < 16 * 32; ++i) {
    a[i] = static_cast<float>(i % 7 - 3);
    b[i] = static_cast<float>(i % 5 - 2);
    A[i] = __float2bfloat16(a[i]);
    B[i] = __float2bfloat16(b[i]);
  }
  for (int k = 0; k < 32; ++k)
    for (int n = 0; n < 16; ++n) Bt[n * 32 + k] = B[k * 16 + n];
  alignas(128) float ab[256], abt[256], twice[256];
  emu::launch(dim3(1), dim3(32), 0, [&] { products(ab, abt, twice, A, B, Bt); });
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float want = 0.0f;
      for (int k = 0; k < 32; ++k) want += a[m * 32 + k] * b[k * 16 + n];
      EXPECT_EQ(ab[m * 16 + n], want) << m << "," << n;
      EXPECT_EQ(abt[m * 16 + n], want) << m << "," << n;
      EXPECT_EQ(twice[m * 16 + n], 2 * want) << m << "," << n;
    }
}

__global__ void misaligned(float* c, const tc::bf16* A, const tc::bf16* B, int offset, int ld) {
  tc::warp_abt<16, 16>(c, 16, A + offset, ld, B, 16);
}

TEST(CudaEmulator, WmmaRefusesWhatTensorCoresRefuse) {
  alignas(128) tc::bf16 A[32 * 32] = {}, B[16 * 16] = {};
  alignas(128) float c[256];
  const std::string ptr =
      launch_error(dim3(1), dim3(32), 0, [&] { misaligned(c, A, B, /*offset=*/8, 16); });
  EXPECT_NE(ptr.find("is not 32-byte aligned"), std::string::npos) << ptr;
  const std::string ld =
      launch_error(dim3(1), dim3(32), 0, [&] { misaligned(c, A, B, /*offset=*/0, 20); });
  EXPECT_NE(ld.find("ldm 20 is not a multiple of 16 bytes"), std::string::npos) << ld;
}

__global__ void store_then_read(float* out, bool sync) {
  LLMP_DYNAMIC_SMEM(smem);
  float* tile = reinterpret_cast<float*>(smem);
  tc::FragC acc;
  nvcuda::wmma::fill_fragment(acc, 1.0f);
  nvcuda::wmma::store_matrix_sync(tile, acc, 16, nvcuda::wmma::mem_row_major);
  if (sync) __syncwarp();
  out[threadIdx.x] = tile[255 - threadIdx.x];  // an element another lane stored
}

// A fragment's elements are spread over the warp's lanes: reading what others stored needs a
// __syncwarp between, on a GPU and here.
TEST(CudaEmulator, ReadingAStoredTileNeedsASyncwarp) {
  std::vector<float> out(32);
  emu::launch(dim3(1), dim3(32), 1024, [&] { store_then_read(out.data(), true); });
  for (float x : out) EXPECT_EQ(x, 1.0f);
  emu::launch(dim3(1), dim3(32), 1024, [&] { store_then_read(out.data(), false); });
  EXPECT_TRUE(std::isnan(out[0])) << "lane 0 read element 255 before lane 31 stored it";
}

}  // namespace
}  // namespace llmp::cuda
