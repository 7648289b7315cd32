// The scheduler of the CUDA emulator (cuda_emulator.h): runs a kernel's body as every thread of
// every block of a grid, on the CPU, one thread at a time, so that a kernel written for nvcc can
// be compiled by g++ and checked here against its kernels/cpu twin without a GPU.
//
// Model. Blocks run one after another. Within a block each CUDA thread is a fiber (ucontext: its
// own stack, switched by swapcontext), and a fiber runs until it reaches a synchronisation point:
//   __syncthreads()        waits until every thread of the block is there;
//   __syncwarp(), a shuffle waits until every lane of its warp is there;
// then the next fiber runs. Each warp runs on its own to its next __syncthreads() before the next
// warp starts (warps in turns ascending and descending from one block barrier to the next), and
// within a warp the lanes run one after another to their next warp-synchronous call, in turns
// ascending (lane 0 to it, then lane 1, ...) and descending. So a thread that reads what another
// writes without a barrier between them reads, in one of the two orders, the value from before
// the write, which is what a missing barrier can do on a GPU, here deterministically; and a warp
// that writes shared memory again (a second block reduction) before the other warps have read
// it, for want of a second __syncthreads(), overwrites it first, as a warp running ahead does on
// a GPU. Dynamic shared memory starts as 0xFF bytes (NaN in fp32 and bf16), so reading it before
// anything wrote it shows.
//
// Errors (launch throws std::runtime_error with the reason, naming the block and thread):
//   - a __syncthreads() that not every thread reaches (some exited: a barrier in divergent code),
//     or threads at different __syncthreads() calls when they meet;
//   - a warp whose lanes wait at different warp-synchronous calls, or a lane that exited;
//   - dynamic shared memory over kMaxDynamicSmem; a WMMA pointer or stride the hardware refuses
//     (wmma.h); anything kernel code reports through fail().
//
// What it does not model: timing, occupancy, memory coalescing or bank conflicts (nothing about
// speed), the warp's lockstep execution, atomics, and the reordering of memory operations
// within a thread. A kernel that passes here can still be slow or race on a GPU in ways this
// schedule does not produce; one that fails here is wrong on a GPU too.
//
// Glossary: a fiber is one emulated CUDA thread; lane = linear thread index mod 32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace llmp::cuda::emu {

/// A grid's or a block's extent (CUDA's dim3) and a thread's or block's index (CUDA's uint3).
struct Extent {
  unsigned x = 1, y = 1, z = 1;
};

constexpr int kWarpSize = 32;
/// The largest dynamic shared memory one block may ask for: an H100's opt-in limit, 227 KiB
/// (cudaDevAttrMaxSharedMemoryPerBlockOptin = 232,448 bytes).
constexpr size_t kMaxDynamicSmem = 232448;

/// Runs body() once per thread of a grid × block launch with smem_bytes of dynamic shared memory
/// per block (128-byte aligned). Throws std::runtime_error on any of the errors above.
void launch(Extent grid, Extent block, size_t smem_bytes, const std::function<void()>& body);

// ---- what kernel code calls (through cuda_emulator.h), valid only inside launch() ----
Extent thread_idx();
Extent block_idx();
Extent block_dim();
Extent grid_dim();
int lane();  ///< the calling thread's lane: its linear index in the block mod 32
unsigned char* dynamic_smem();
void sync_block();              ///< __syncthreads()
void sync_warp(unsigned mask);  ///< __syncwarp(mask); the emulator takes the full warp only
uint64_t exchange(uint64_t v, int from_lane);     ///< a shuffle: v out, lane from_lane's value in
[[noreturn]] void fail(const std::string& what);  ///< ends the launch with this error

}  // namespace llmp::cuda::emu
