// The emulator's scheduler (block_runner.h): one fiber per CUDA thread, switched at barriers
// (context_switch.h).
#include "kernels/cuda/emulator/block_runner.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/emulator/context_switch.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace llmp::cuda::emu {
namespace {

// Each fiber's stack. The kernels keep a few KiB of locals (an emulated WMMA fragment holds all
// 256 elements); AddressSanitizer's red zones need room too.
constexpr size_t kStackBytes = 256 * 1024;

enum class State { kReady, kAtBlockBarrier, kAtWarpBarrier, kDone, kFailed };

struct Fiber {
  Context ctx;
  State state = State::kReady;
  int64_t block_syncs = 0, warp_syncs = 0;  // barriers passed: lanes that meet must agree
  void* fake_stack = nullptr;               // AddressSanitizer's, while switched out
  uint64_t slot[2] = {0, 0};                // its shuffles' values, by warp_syncs' parity
};

struct Launch {
  Extent grid, block, block_idx;
  int threads = 0, current = 0;
  std::vector<Fiber> fibers;
  char* stacks = nullptr;  // threads × kStackBytes (fiber_stacks)
  std::vector<unsigned char> smem_bytes;  // 128 bytes more than asked, for the alignment
  unsigned char* smem = nullptr;
  const std::function<void()>* body = nullptr;
  Context scheduler;
  const void* scheduler_stack = nullptr;  // for AddressSanitizer
  size_t scheduler_stack_size = 0;
  std::string error;
};

thread_local Launch* t_launch = nullptr;

/// Room for `threads` fibers' stacks, kept from one launch to the next on this host thread. A
/// fresh allocation per launch (threads × 256 KiB, which malloc maps and unmaps each time) cost a
/// page fault per fiber per launch on first touch: 5 steps of tiny's emulated baseline took
/// 1.92 s with it and 1.31 s without (0.59 s of system time → 0.03 s).
char* fiber_stacks(int threads) {
  thread_local std::unique_ptr<char[]> stacks;
  thread_local int capacity = 0;
  if (threads > capacity) {
    stacks.reset(new char[size_t(threads) * kStackBytes]);
    capacity = threads;
  }
#if defined(__SANITIZE_ADDRESS__)
  // A fiber ends by switching away (fiber_main never returns), so the red zones of its last
  // frames stay poisoned; the next launch's fibers start from clean stacks, as with new memory.
  __asan_unpoison_memory_region(stacks.get(), size_t(threads) * kStackBytes);
#endif
  return stacks.get();
}

Launch& active() {
  if (t_launch == nullptr) throw std::logic_error("CUDA emulator: device code outside launch()");
  return *t_launch;
}

std::string where(const Launch& l, int t) {
  return "block (" + std::to_string(l.block_idx.x) + "," + std::to_string(l.block_idx.y) + "," +
         std::to_string(l.block_idx.z) + ") thread " + std::to_string(t);
}

// ---- switching, with AddressSanitizer told about each stack (no-ops without it) ----
void start_switch(void** fake, const void* bottom, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}
void finish_switch(void* fake, const void** bottom, size_t* size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}

/// Scheduler → fiber t, until it yields or ends.
void resume(Launch& l, int t) {
  l.current = t;
  void* fake = nullptr;
  start_switch(&fake, l.stacks + size_t(t) * kStackBytes, kStackBytes);
  switch_context(l.scheduler, l.fibers[t].ctx);
  finish_switch(fake, nullptr, nullptr);
}

/// The running fiber → the scheduler, in `state`; returns when the scheduler resumes it.
void yield(State state) {
  Launch& l = active();
  Fiber& f = l.fibers[l.current];
  f.state = state;
  start_switch(&f.fake_stack, l.scheduler_stack, l.scheduler_stack_size);
  switch_context(f.ctx, l.scheduler);
  finish_switch(f.fake_stack, &l.scheduler_stack, &l.scheduler_stack_size);
}

void fiber_main() {
  Launch& l = *t_launch;
  finish_switch(nullptr, &l.scheduler_stack, &l.scheduler_stack_size);
  try {
    (*l.body)();
    l.fibers[l.current].state = State::kDone;
  } catch (const std::exception& e) {
    if (l.error.empty()) l.error = where(l, l.current) + ": " + e.what();
    l.fibers[l.current].state = State::kFailed;
  }
  start_switch(nullptr, l.scheduler_stack, l.scheduler_stack_size);  // this stack is done
  switch_context(l.fibers[l.current].ctx, l.scheduler);              // never resumed
  std::abort();
}

/// Lets warp [w0, w0 + 32)'s lanes go when every one of them waits at a warp-synchronous call;
/// returns whether it did, and sets l.error when they wait at different ones.
bool release_warp(Launch& l, int w0) {
  const int w1 = std::min(l.threads, w0 + kWarpSize);
  for (int t = w0; t < w1; ++t)
    if (l.fibers[t].state != State::kAtWarpBarrier) return false;
  for (int t = w0; t < w1; ++t)
    if (l.fibers[t].warp_syncs != l.fibers[w0].warp_syncs) {
      l.error = where(l, t) + ": lanes of one warp at different warp-synchronous calls (" +
                std::to_string(l.fibers[t].warp_syncs) + " against lane 0's " +
                std::to_string(l.fibers[w0].warp_syncs) + ")";
      return false;
    }
  for (int t = w0; t < w1; ++t) l.fibers[t].state = State::kReady;
  return true;
}

/// Lets waiting fibers go when their barrier is complete; returns whether any may run now, and
/// sets l.error when none can (a deadlock of the kernel).
bool release(Launch& l) {
  bool any = false;
  for (int w0 = 0; w0 < l.threads; w0 += kWarpSize) {
    any = release_warp(l, w0) || any;
    if (!l.error.empty()) return false;
  }
  if (any) return true;
  int at_block = 0, done = 0;
  for (const Fiber& f : l.fibers) {
    at_block += f.state == State::kAtBlockBarrier;
    done += f.state == State::kDone;
  }
  if (at_block == l.threads) {
    for (int t = 0; t < l.threads; ++t)
      if (l.fibers[t].block_syncs != l.fibers[0].block_syncs) {
        l.error = where(l, t) + ": threads at different __syncthreads() calls (its " +
                  std::to_string(l.fibers[t].block_syncs) + "th against thread 0's " +
                  std::to_string(l.fibers[0].block_syncs) + "th)";
        return false;
      }
    for (Fiber& f : l.fibers) f.state = State::kReady;
    return true;
  }
  if (done == l.threads) return false;
  for (int t = 0; t < l.threads; ++t) {
    if (l.fibers[t].state == State::kAtBlockBarrier) {
      l.error = where(l, t) + ": __syncthreads() not reached by every thread of the block (" +
                std::to_string(done) + " exited, " + std::to_string(at_block) +
                " waiting): a barrier in divergent code";
      return false;
    }
    if (l.fibers[t].state == State::kAtWarpBarrier) {
      l.error = where(l, t) +
                ": a warp-synchronous call (__syncwarp, a shuffle, a *_sync) not "
                "reached by every lane of its warp";
      return false;
    }
  }
  l.error = "CUDA emulator: no thread can run and not all are done";
  return false;
}

void run_block(Launch& l) {
  std::memset(l.smem, 0xFF, l.smem_bytes.size() - 128);  // NaN until written
  for (int t = 0; t < l.threads; ++t) {
    Fiber& f = l.fibers[t];
    f = Fiber{};
    make_context(f.ctx, l.stacks + size_t(t) * kStackBytes, kStackBytes, fiber_main);
  }
  // Each warp runs on its own to the next __syncthreads() (or its end) before the next warp
  // starts, warps in turns ascending and descending from one block barrier to the next; within a
  // warp the lanes run in turns too, ascending and descending from one warp-synchronous call to
  // the next. So a write that a thread makes and another reads without a barrier between them
  // is read before it is made in one of the two orders, and a warp that writes shared memory
  // again before the other warps have read it (a missing second __syncthreads) overwrites it
  // first, as a warp that runs ahead does on a GPU.
  const int warps = (l.threads + kWarpSize - 1) / kWarpSize;
  bool lanes_up = true;
  for (bool warps_up = true;; warps_up = !warps_up) {
    for (int i = 0; i < warps; ++i) {
      const int w0 = (warps_up ? i : warps - 1 - i) * kWarpSize;
      const int n = std::min(l.threads - w0, kWarpSize);
      do {  // this warp's lanes, until each waits at a __syncthreads(), is done, or is stuck
        for (int j = 0; j < n; ++j) {
          const int t = w0 + (lanes_up ? j : n - 1 - j);
          if (l.fibers[t].state != State::kReady) continue;
          resume(l, t);
          if (!l.error.empty()) throw std::runtime_error(l.error);
        }
        lanes_up = !lanes_up;
      } while (release_warp(l, w0));
      if (!l.error.empty()) throw std::runtime_error(l.error);
    }
    if (!release(l)) {
      if (!l.error.empty()) throw std::runtime_error(l.error);
      return;  // every thread is done
    }
  }
}

}  // namespace

void launch(Extent grid, Extent block, size_t smem_bytes, const std::function<void()>& body) {
  const int64_t threads = int64_t{block.x} * block.y * block.z;
  if (threads < 1 || threads > 1024)
    throw std::runtime_error("CUDA emulator: " + std::to_string(threads) +
                             " threads per block (1 to 1024)");
  if (smem_bytes > kMaxDynamicSmem)
    throw std::runtime_error("CUDA emulator: " + std::to_string(smem_bytes) +
                             " bytes of dynamic shared memory, over the " +
                             std::to_string(kMaxDynamicSmem) + " an H100 allows per block");
  if (t_launch != nullptr) throw std::logic_error("CUDA emulator: launch() inside a kernel");
  Launch l;
  l.grid = grid;
  l.block = block;
  l.threads = static_cast<int>(threads);
  l.fibers.resize(l.threads);
  l.stacks = fiber_stacks(l.threads);
  l.smem_bytes.resize(smem_bytes + 128);
  l.smem = l.smem_bytes.data() + (128 - reinterpret_cast<uintptr_t>(l.smem_bytes.data()) % 128);
  l.body = &body;
  t_launch = &l;
  try {
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          l.block_idx = Extent{x, y, z};
          run_block(l);
        }
  } catch (...) {
    t_launch = nullptr;
    throw;
  }
  t_launch = nullptr;
}

Extent thread_idx() {
  const Launch& l = active();
  const unsigned t = static_cast<unsigned>(l.current);
  return Extent{t % l.block.x, t / l.block.x % l.block.y, t / (l.block.x * l.block.y)};
}
Extent block_idx() { return active().block_idx; }
Extent block_dim() { return active().block; }
Extent grid_dim() { return active().grid; }
int lane() { return active().current % kWarpSize; }
unsigned char* dynamic_smem() { return active().smem; }

namespace {
/// The mask naming every lane of the running thread's warp (a partial last warp has fewer).
unsigned full_warp_mask(const Launch& l) {
  const int width = std::min(kWarpSize, l.threads - l.current / kWarpSize * kWarpSize);
  return width == kWarpSize ? 0xFFFFFFFFu : (1u << width) - 1u;
}
}  // namespace

void sync_block() {
  ++active().fibers[active().current].block_syncs;
  yield(State::kAtBlockBarrier);
}

void sync_warp(unsigned mask) {
  Launch& l = active();
  if (mask != full_warp_mask(l))
    fail("a warp-synchronous call with mask " + std::to_string(mask) +
         ": the emulator takes the full warp's mask only");
  ++l.fibers[l.current].warp_syncs;
  yield(State::kAtWarpBarrier);
}

uint64_t exchange(uint64_t v, int from_lane) {
  Launch& l = active();
  const int w0 = l.current / kWarpSize * kWarpSize, width = std::min(kWarpSize, l.threads - w0);
  if (from_lane < 0 || from_lane >= width)
    fail("a shuffle from lane " + std::to_string(from_lane) + " of a warp of " +
         std::to_string(width));
  // One barrier per shuffle: a lane about to pass its w-th warp barrier offers in slot[w % 2],
  // meets the others (every lane of the warp is at the same w: release() checks it), and takes.
  // It can overwrite that slot only before its (w+2)-th barrier, after passing the (w+1)-th,
  // which every lane reaches only once it has taken its value from the w-th.
  Fiber& me = l.fibers[l.current];
  const int k = static_cast<int>(me.warp_syncs % 2);
  me.slot[k] = v;
  sync_warp(full_warp_mask(l));  // every lane has offered
  return l.fibers[w0 + from_lane].slot[k];
}

void fail(const std::string& what) {
  Launch& l = active();
  if (l.error.empty()) l.error = where(l, l.current) + ": " + what;
  yield(State::kFailed);  // never resumed: run_block throws l.error
  std::abort();
}

}  // namespace llmp::cuda::emu
