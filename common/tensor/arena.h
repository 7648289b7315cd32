// A fixed-capacity arena behind the tensor allocator, and ZeRO-R's memory defragmentation.
//
// A GPU has a fixed amount of memory and its allocator (cudaMalloc, PyTorch's caching allocator)
// carves tensors out of it; a request succeeds only if ONE free block is large enough. Training
// interleaves buffers that live for very different times: model states and activation
// checkpoints (long-lived) next to recomputed activations and temporaries (freed within a unit).
// When the short-lived ones are freed, the long-lived ones stay behind as islands, so the free
// memory is plenty in total but cut into pieces, and a large request fails: an out-of-memory
// error "with over 30% of memory still available" (ZeRO, Rajbhandari et al. 2020, §6.3). ZeRO-R's
// fix (MD): pre-allocate contiguous chunks for the long-lived tensors (activation checkpoints,
// gradients) and copy them there as they are produced, so the two lifetimes never interleave.
//
// Arena is that on the host, so that the effect is seen and measured on a CPU-only machine:
//   - one block of `capacity` bytes taken once (--arena_bytes N), nothing else;
//   - an address-ordered free list, first fit, neighbours coalesced on free, 64-byte alignment
//     (every block a whole number of 64-byte lines, as CpuAllocator hands out);
//   - Mode::kFirstFit: every request takes the lowest free block that fits (one region);
//   - Mode::kDefrag (--defrag): long-lived requests take the HIGHEST free block that fits and
//     are carved from its top end, short-lived ones the lowest and its bottom end: the long-lived
//     region grows down from the top, the short-lived one up from the bottom, and a long-lived
//     buffer does not land among short-lived ones while there is room between the two.
// Long-lived: MemCategory kParameters, kGradients, kOptimizerState, and anything allocated while
// a LongLivedScope is open on this thread (an activation checkpoint is kActivations like a
// temporary: the walk that keeps it says so, common/nn/unit_runner.cc).
//
// Glossary: capacity N_a (bytes of the arena), used (bytes in allocated blocks, rounded to 64),
// total free N_a - used, largest free block (the largest single request that can succeed now),
// fragmentation at peak = largest free / total free at the moment used was highest (1 = one
// free block, → 0 = free memory in crumbs). Not thread-safe: one trainer thread per rank.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "common/tensor/tensor.h"

namespace llmp {

/// Thrown when no free block fits a request. what() is one line naming the request, its
/// category, the total free bytes and the largest free block, e.g. "out of memory in the arena:
/// requested 1.50 MiB (activations), free 3.20 MiB in total, largest free block 0.75 MiB
/// (fragmentation); try --defrag or a larger --arena_bytes".
class ArenaOutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What Arena::stats() reports, all in bytes except the ratio.
struct ArenaStats {
  int64_t capacity = 0;       ///< N_a
  int64_t used = 0;           ///< bytes in allocated blocks now (each rounded up to 64)
  int64_t peak_used = 0;      ///< the most `used` has been
  int64_t total_free = 0;     ///< Σ free blocks now, walked over the free list
  int64_t largest_free = 0;   ///< the largest free block now
  int64_t total_free_at_peak = 0;    ///< Σ free blocks when `used` reached peak_used
  int64_t largest_free_at_peak = 0;  ///< the largest free block then
  int64_t allocations = 0;    ///< successful allocate calls
  int64_t failures = 0;       ///< ArenaOutOfMemory thrown
  /// largest_free_at_peak / total_free_at_peak (1 when nothing was free at peak).
  double fragmentation_at_peak() const {
    return total_free_at_peak > 0 ? double(largest_free_at_peak) / total_free_at_peak : 1.0;
  }
};

/// A first-fit allocator over one fixed host block. Register it for Device::kCPU
/// (register_allocator) and every Tensor allocated after that lives inside it; each Storage
/// gives its bytes back to the allocator it came from, so tensors made before stay valid.
class Arena : public Allocator {
 public:
  enum class Mode { kFirstFit, kDefrag };
  static constexpr int64_t kAlign = 64;  ///< bytes: block alignment and size granularity

  /// Takes `capacity` bytes (rounded down to 64; ≥ 64) from the host once. Throws
  /// std::invalid_argument for capacity < 64, std::bad_alloc if the host has not got them.
  Arena(int64_t capacity, Mode mode);
  ~Arena() override;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  /// A short-lived request of `bytes` (0 is given one 64-byte line). Throws ArenaOutOfMemory.
  void* allocate(int64_t bytes) override;
  /// `bytes` counted under `category`; long-lived by category or LongLivedScope (see the top).
  void* allocate_for(int64_t bytes, MemCategory category) override;
  /// Returns the block at `p` (from this arena) to the free list, merged with free neighbours.
  /// Throws std::invalid_argument for a pointer this arena did not hand out.
  void deallocate(void* p, int64_t bytes) override;

  Mode mode() const { return mode_; }
  ArenaStats stats() const;
  /// Byte offset of `p` from the start of the arena (tests and diagrams).
  int64_t offset_of(const void* p) const { return static_cast<const char*>(p) - base_; }
  /// The free blocks, offset → size, in address order (tests).
  const std::map<int64_t, int64_t>& free_blocks() const { return free_; }

 private:
  void* place(int64_t bytes, bool long_lived, MemCategory category);
  int64_t largest_free() const;

  char* base_ = nullptr;
  int64_t capacity_ = 0;
  Mode mode_;
  std::map<int64_t, int64_t> free_;              ///< offset → size, address-ordered, coalesced
  std::unordered_map<int64_t, int64_t> taken_;   ///< offset → size of each allocated block
  ArenaStats stats_;
};

/// While one is alive on this thread, every allocation is long-lived whatever its category
/// (activation checkpoints: ZeRO-R's copy into the pre-allocated contiguous region). Nests.
class LongLivedScope {
 public:
  LongLivedScope();
  ~LongLivedScope();
  LongLivedScope(const LongLivedScope&) = delete;
  LongLivedScope& operator=(const LongLivedScope&) = delete;
};

/// True while a LongLivedScope is open on this thread.
bool long_lived_scope_active();

/// The arena registered for Device::kCPU by install_cpu_arena, or nullptr (the default allocator).
Arena* installed_cpu_arena();

/// Creates an Arena of `capacity` bytes in `mode`, registers it for Device::kCPU and returns it.
/// It lives until the process ends (tensors may outlive the caller). Once per process: throws
/// std::logic_error when one is already installed.
Arena& install_cpu_arena(int64_t capacity, Arena::Mode mode);

}  // namespace llmp
