// Arena (arena.h): first fit, coalescing, the out-of-memory line, defrag's two regions, stats.
// Sizes are whole 64-byte lines (L = 64 B) so that every offset below has a closed form.
#include "common/tensor/arena.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmp {
namespace {

constexpr int64_t L = Arena::kAlign;

TEST(Arena, FirstFitTakesTheLowestBlockThatFits) {
  Arena a(16 * L, Arena::Mode::kFirstFit);
  void* p0 = a.allocate(2 * L);  // [0, 2L)
  void* p1 = a.allocate(1 * L);  // [2L, 3L)
  void* p2 = a.allocate(4 * L);  // [3L, 7L)
  void* p3 = a.allocate(1 * L);  // [7L, 8L)
  EXPECT_EQ(a.offset_of(p0), 0);
  EXPECT_EQ(a.offset_of(p1), 2 * L);
  EXPECT_EQ(a.offset_of(p2), 3 * L);
  EXPECT_EQ(a.offset_of(p3), 7 * L);
  a.deallocate(p0, 2 * L);  // holes: [0, 2L), [3L, 7L), and the tail [8L, 16L)
  a.deallocate(p2, 4 * L);
  // 2L fits the lowest hole exactly; 3L skips the (now full) first and takes the second.
  void* q = a.allocate(2 * L);
  EXPECT_EQ(a.offset_of(q), 0);
  void* r = a.allocate(3 * L);
  EXPECT_EQ(a.offset_of(r), 3 * L);
  // What is left of the split hole is exactly its remainder: [6L, 7L) of 1L.
  ASSERT_EQ(a.free_blocks().count(6 * L), 1u);
  EXPECT_EQ(a.free_blocks().at(6 * L), 1 * L);
  EXPECT_EQ(a.free_blocks().at(8 * L), 8 * L);
  void* s = a.allocate(1 * L);  // the lowest fitting block is the 1L remainder, not the tail
  EXPECT_EQ(a.offset_of(s), 6 * L);
  for (void* p : {q, r, s, p1, p3}) a.deallocate(p, 0);
  EXPECT_EQ(a.stats().used, 0);
}

TEST(Arena, RequestsAreRoundedToWholeLinesAndZeroBytesGetOne) {
  Arena a(8 * L, Arena::Mode::kFirstFit);
  void* p = a.allocate(1);
  void* q = a.allocate(0);
  void* r = a.allocate(L + 1);
  EXPECT_EQ(a.offset_of(q), L);
  EXPECT_EQ(a.offset_of(r), 2 * L);
  EXPECT_EQ(a.stats().used, 4 * L);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % L, 0u);
  for (void* x : {p, q, r}) a.deallocate(x, 0);
}

TEST(Arena, FreeCoalescesWithBothNeighbours) {
  Arena a(8 * L, Arena::Mode::kFirstFit);
  void* A = a.allocate(L);
  void* B = a.allocate(L);
  void* C = a.allocate(L);
  void* D = a.allocate(L);  // keeps C's upper neighbour taken
  a.deallocate(A, L);
  a.deallocate(B, L);  // adjacent to A: one block [0, 2L)
  ASSERT_EQ(a.free_blocks().size(), 2u);  // [0, 2L) and the tail [4L, 8L)
  EXPECT_EQ(a.free_blocks().at(0), 2 * L);
  // A 2L request now fits at 0 only because A and B were merged.
  void* AB = a.allocate(2 * L);
  EXPECT_EQ(a.offset_of(AB), 0);
  a.deallocate(AB, 2 * L);
  a.deallocate(D, L);  // merges with the tail: [3L, 8L)
  EXPECT_EQ(a.free_blocks().at(3 * L), 5 * L);
  a.deallocate(C, L);  // merges below and above: one block, the whole arena
  ASSERT_EQ(a.free_blocks().size(), 1u);
  EXPECT_EQ(a.free_blocks().at(0), 8 * L);
  EXPECT_EQ(a.stats().largest_free, 8 * L);
}

TEST(Arena, OutOfMemoryNamesTheRequestTotalFreeAndLargestBlock) {
  Arena a(8 * L, Arena::Mode::kFirstFit);
  std::vector<void*> p;
  for (int i = 0; i < 8; ++i) p.push_back(a.allocate(L));
  for (int i = 0; i < 8; i += 2) a.deallocate(p[i], L);  // 4 free lines, none adjacent
  try {
    a.allocate_for(2 * L, MemCategory::kActivations);
    FAIL() << "a 2-line request fitted into 1-line holes";
  } catch (const ArenaOutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(what,
              "out of memory in the arena: requested 128 B (activations) of 512 B, free 256 B in "
              "total, largest free block 64 B (fragmentation); try --defrag or a larger "
              "--arena_bytes");
  }
  EXPECT_EQ(a.stats().failures, 1);
  try {  // more than is free in total: not fragmentation, and --defrag would not help
    a.allocate_for(5 * L, MemCategory::kGradients);
    FAIL() << "5 lines allocated with 4 free";
  } catch (const ArenaOutOfMemory& e) {
    EXPECT_EQ(std::string(e.what()),
              "out of memory in the arena: requested 320 B (gradients) of 512 B, free 256 B in "
              "total, largest free block 64 B; try a larger --arena_bytes");
  }
  for (int i = 1; i < 8; i += 2) a.deallocate(p[i], L);
}

TEST(Arena, DefragPutsLongLivedAtTheTopAndShortLivedAtTheBottom) {
  // The interleaving ZeRO §6.3 describes: a long-lived buffer (an activation checkpoint) made
  // between two short-lived ones (temporaries). First fit leaves it between their holes;
  // defrag puts it at the top, so the freed temporaries merge into one block.
  for (Arena::Mode mode : {Arena::Mode::kFirstFit, Arena::Mode::kDefrag}) {
    Arena a(8 * L, mode);
    void* t1 = a.allocate_for(2 * L, MemCategory::kActivations);
    void* ckpt;
    {
      LongLivedScope keep;
      ckpt = a.allocate_for(2 * L, MemCategory::kActivations);
    }
    void* t2 = a.allocate_for(2 * L, MemCategory::kActivations);
    void* grad = a.allocate_for(L, MemCategory::kGradients);  // long-lived by category
    a.deallocate(t1, 2 * L);
    a.deallocate(t2, 2 * L);
    const ArenaStats s = a.stats();
    EXPECT_EQ(s.total_free, 5 * L);
    if (mode == Arena::Mode::kFirstFit) {
      EXPECT_EQ(a.offset_of(ckpt), 2 * L);  // between t1 and t2
      EXPECT_EQ(a.offset_of(grad), 6 * L);
      EXPECT_EQ(s.largest_free, 2 * L);     // [0, 2L), [4L, 6L) and [7L, 8L)
      EXPECT_THROW(a.allocate(4 * L), ArenaOutOfMemory);
    } else {
      EXPECT_EQ(a.offset_of(ckpt), 6 * L);  // the top
      EXPECT_EQ(a.offset_of(grad), 5 * L);  // right below it
      EXPECT_EQ(s.largest_free, 5 * L);     // the temporaries' holes and the gap: [0, 5L)
      a.deallocate(a.allocate(4 * L), 4 * L);
    }
    a.deallocate(ckpt, 2 * L);
    a.deallocate(grad, L);
  }
}

TEST(Arena, DefragNeverPlacesALongLivedBlockBetweenShortLivedOnes) {
  Arena a(64 * L, Arena::Mode::kDefrag);
  std::vector<void*> shorts, longs;
  for (int i = 0; i < 10; ++i) {  // alternate, as a forward pass with checkpoints does
    void* t = a.allocate_for((i % 3 + 1) * L, MemCategory::kActivations);
    if (i % 2 == 0) a.deallocate(t, 0);  // a temporary, freed at once
    else shorts.push_back(t);
    LongLivedScope keep;
    longs.push_back(a.allocate_for((i % 2 + 1) * L, MemCategory::kActivations));
  }
  shorts.push_back(a.allocate_for(L, MemCategory::kOther));
  longs.push_back(a.allocate_for(2 * L, MemCategory::kOptimizerState));
  int64_t highest_short = -1, lowest_long = 64 * L;
  for (void* p : shorts) highest_short = std::max(highest_short, a.offset_of(p));
  for (void* p : longs) lowest_long = std::min(lowest_long, a.offset_of(p));
  EXPECT_LT(highest_short, lowest_long);
  for (void* p : shorts) a.deallocate(p, 0);
  for (void* p : longs) a.deallocate(p, 0);
  EXPECT_EQ(a.free_blocks().size(), 1u);
}

TEST(Arena, StatsRecordTheFreeListAtPeak) {
  Arena a(10 * L, Arena::Mode::kFirstFit);
  void* x = a.allocate(2 * L);
  void* y = a.allocate(3 * L);
  a.deallocate(x, 0);           // used 3L; free [0, 2L) and [5L, 10L)
  void* z = a.allocate(4 * L);  // peak: used 7L; free [0, 2L) and [9L, 10L)
  ArenaStats s = a.stats();
  EXPECT_EQ(s.capacity, 10 * L);
  EXPECT_EQ(s.peak_used, 7 * L);
  EXPECT_EQ(s.total_free_at_peak, 3 * L);
  EXPECT_EQ(s.largest_free_at_peak, 2 * L);
  EXPECT_DOUBLE_EQ(s.fragmentation_at_peak(), 2.0 / 3.0);
  EXPECT_EQ(s.allocations, 3);
  a.deallocate(y, 0);
  a.deallocate(z, 0);
  s = a.stats();
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.peak_used, 7 * L);
  EXPECT_EQ(s.total_free, 10 * L);
}

TEST(Arena, BadInputIsRefused) {
  EXPECT_THROW(Arena(63, Arena::Mode::kFirstFit), std::invalid_argument);
  Arena a(4 * L, Arena::Mode::kFirstFit);
  int x = 0;
  EXPECT_THROW(a.deallocate(&x, 4), std::invalid_argument);
}

TEST(Arena, TensorsLiveInTheInstalledArenaAndOlderOnesStayValid) {
  Tensor before = Tensor::zeros({16});  // from the default CPU allocator
  Arena& a = install_cpu_arena(64 * L, Arena::Mode::kDefrag);
  EXPECT_EQ(installed_cpu_arena(), &a);
  EXPECT_THROW(install_cpu_arena(64 * L, Arena::Mode::kDefrag), std::logic_error);
  {
    Tensor p = Tensor::zeros({16}, DType::kF32, MemCategory::kParameters);
    Tensor act = Tensor::zeros({16}, DType::kF32, MemCategory::kActivations);
    EXPECT_EQ(a.offset_of(p.raw()), 63 * L);  // long-lived: the top line
    EXPECT_EQ(a.offset_of(act.raw()), 0);     // short-lived: the bottom
    EXPECT_EQ(a.stats().used, 2 * L);
  }
  EXPECT_EQ(a.stats().used, 0);
  before = Tensor();  // freed by the allocator it came from, not the arena
  EXPECT_EQ(a.stats().used, 0);
}

}  // namespace
}  // namespace llmp
