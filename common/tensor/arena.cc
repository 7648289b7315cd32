// Arena: first fit over an address-ordered free list (see arena.h for the idea and the source).
//
// Glossary: off (byte offset of a block from the arena's start), need (a request rounded up to
// whole 64-byte lines), free_ (offset → size of each free block, never two adjacent: they are
// merged), taken_ (offset → size of each allocated block).
#include "common/tensor/arena.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <new>

#include "common/tensor/memory.h"

namespace llmp {

namespace {
thread_local int g_long_lived_depth = 0;
Arena* g_installed = nullptr;

int64_t round_up(int64_t bytes) {
  return std::max<int64_t>(Arena::kAlign, (bytes + Arena::kAlign - 1) / Arena::kAlign * Arena::kAlign);
}

bool long_lived_category(MemCategory c) {
  return c == MemCategory::kParameters || c == MemCategory::kGradients ||
         c == MemCategory::kOptimizerState;
}
}  // namespace

LongLivedScope::LongLivedScope() { ++g_long_lived_depth; }
LongLivedScope::~LongLivedScope() { --g_long_lived_depth; }
bool long_lived_scope_active() { return g_long_lived_depth > 0; }

Arena::Arena(int64_t capacity, Mode mode) : capacity_(capacity / kAlign * kAlign), mode_(mode) {
  if (capacity_ < kAlign)
    throw std::invalid_argument("arena capacity " + std::to_string(capacity) +
                                " bytes is smaller than one " + std::to_string(kAlign) +
                                "-byte block");
  base_ = static_cast<char*>(std::aligned_alloc(kAlign, capacity_));
  if (!base_) throw std::bad_alloc();
  free_[0] = capacity_;
  stats_.capacity = capacity_;
  stats_.total_free_at_peak = stats_.largest_free_at_peak = capacity_;
}

Arena::~Arena() { std::free(base_); }

void* Arena::allocate(int64_t bytes) { return place(bytes, long_lived_scope_active(), MemCategory::kOther); }

void* Arena::allocate_for(int64_t bytes, MemCategory category) {
  return place(bytes, long_lived_category(category) || long_lived_scope_active(), category);
}

void* Arena::place(int64_t bytes, bool long_lived, MemCategory category) {
  const int64_t need = round_up(bytes);
  const bool from_top = mode_ == Mode::kDefrag && long_lived;
  int64_t off = -1;
  if (from_top) {
    // Defrag, long-lived: the highest block that fits, carved from its top end.
    for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
      if (it->second < need) continue;
      const int64_t block = it->first, size = it->second;
      off = block + size - need;
      if (size == need) free_.erase(block);
      else free_[block] = size - need;  // the bottom part stays free
      break;
    }
  } else {
    // First fit: the lowest block that fits, carved from its bottom end.
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < need) continue;
      const int64_t block = it->first, size = it->second;
      off = block;
      free_.erase(it);
      if (size > need) free_[block + need] = size - need;  // the top part stays free
      break;
    }
  }
  if (off < 0) {
    ++stats_.failures;
    const int64_t total = capacity_ - stats_.used;
    throw ArenaOutOfMemory(
        "out of memory in the arena: requested " + format_bytes(double(bytes)) + " (" +
        to_string(category) + (from_top ? ", long-lived" : "") + ") of " +
        format_bytes(double(capacity_)) + ", free " + format_bytes(double(total)) +
        " in total, largest free block " + format_bytes(double(largest_free())) +
        // Enough free in total but in pieces: fragmentation, which --defrag may cure.
        (need <= total ? " (fragmentation)" : "") +
        (need <= total && mode_ == Mode::kFirstFit ? "; try --defrag or a larger --arena_bytes"
                                                   : "; try a larger --arena_bytes"));
  }
  taken_[off] = need;
  stats_.used += need;
  ++stats_.allocations;
  if (stats_.used > stats_.peak_used) {
    stats_.peak_used = stats_.used;
    int64_t total = 0;
    for (const auto& [o, size] : free_) total += size;
    stats_.total_free_at_peak = total;
    stats_.largest_free_at_peak = largest_free();
  }
  return base_ + off;
}

void Arena::deallocate(void* p, int64_t /*bytes*/) {
  const int64_t off = offset_of(p);
  auto t = taken_.find(off);
  if (t == taken_.end())
    throw std::invalid_argument("arena: deallocate of a pointer it did not hand out (offset " +
                                std::to_string(off) + ")");
  int64_t start = off, size = t->second;
  stats_.used -= size;
  taken_.erase(t);
  // Coalesce: merge with the free block that ends where this one starts, and the one that
  // starts where it ends, so that free_ never holds two adjacent blocks.
  auto next = free_.lower_bound(start);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    free_.erase(next);
  }
  free_[start] = size;
}

int64_t Arena::largest_free() const {
  int64_t best = 0;
  for (const auto& [off, size] : free_) best = std::max(best, size);
  return best;
}

ArenaStats Arena::stats() const {
  ArenaStats s = stats_;
  s.total_free = 0;
  for (const auto& [off, size] : free_) s.total_free += size;
  s.largest_free = largest_free();
  return s;
}

Arena* installed_cpu_arena() { return g_installed; }

Arena& install_cpu_arena(int64_t capacity, Arena::Mode mode) {
  if (g_installed) throw std::logic_error("install_cpu_arena: an arena is already installed");
  g_installed = new Arena(capacity, mode);  // never deleted: tensors may outlive any caller
  register_allocator(Device::kCPU, g_installed);
  return *g_installed;
}

}  // namespace llmp
