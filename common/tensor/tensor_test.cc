#include "common/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace llmp {
namespace {

TEST(Tensor, AllocationIsCountedUnderItsCategoryUntilTheLastViewDies) {
  auto& mt = MemoryTracker::instance();
  const int64_t before = mt.current(MemCategory::kGradients);
  {
    Tensor g = Tensor::zeros({10, 3}, DType::kF32, MemCategory::kGradients);
    EXPECT_EQ(mt.current(MemCategory::kGradients) - before, 120);
    Tensor shard = g.narrow(6, 12);  // a view: no new bytes
    EXPECT_EQ(mt.current(MemCategory::kGradients) - before, 120);
    g = Tensor();
    EXPECT_EQ(mt.current(MemCategory::kGradients) - before, 120);  // shard keeps storage alive
    EXPECT_EQ(shard.numel(), 12);
  }
  EXPECT_EQ(mt.current(MemCategory::kGradients), before);
  EXPECT_GE(mt.peak(MemCategory::kGradients) - before, 120);
}

TEST(Tensor, NarrowAddressesTheRightElements) {
  Tensor t = Tensor::empty({8});
  for (int i = 0; i < 8; ++i) t.f32()[i] = static_cast<float>(i);
  Tensor s = t.narrow(3, 4);
  EXPECT_EQ(s.f32()[0], 3.0f);
  EXPECT_EQ(s.narrow(1, 2).f32()[1], 5.0f);
  EXPECT_THROW(t.narrow(6, 3), std::out_of_range);
}

TEST(Tensor, HalfPrecisionTypesTakeTwoBytes) {
  Tensor h = Tensor::empty({5}, DType::kBF16);
  EXPECT_EQ(h.nbytes(), 10);
  EXPECT_THROW(h.f32(), std::runtime_error);
  EXPECT_EQ(parse_dtype("bf16"), DType::kBF16);
  EXPECT_THROW(parse_dtype("f8"), std::invalid_argument);
}

// The bookkeeping dtypes: f64 (metrics) and u8 (serialised records).
TEST(Tensor, DoubleAndByteTypes) {
  Tensor d = Tensor::zeros({3}, DType::kF64);
  EXPECT_EQ(d.nbytes(), 24);
  d.f64()[2] = 0.1;
  EXPECT_EQ(d.narrow(2, 1).f64()[0], 0.1);
  EXPECT_THROW(d.f32(), std::runtime_error);
  Tensor b = Tensor::empty({7}, DType::kU8);
  EXPECT_EQ(b.nbytes(), 7);
  EXPECT_THROW(b.f64(), std::runtime_error);
  EXPECT_EQ(b.describe(), "(7,) u8 cpu");
  EXPECT_EQ(parse_dtype("f64"), DType::kF64);
  EXPECT_EQ(parse_dtype("float64"), DType::kF64);
  EXPECT_EQ(parse_dtype("u8"), DType::kU8);
  EXPECT_STREQ(to_string(DType::kF64), "f64");
  EXPECT_EQ(dtype_size(DType::kU8), 1);
}

TEST(Tensor, ViewKeepsNumel) {
  Tensor t = Tensor::zeros({4, 6});
  EXPECT_EQ(t.view({2, 12}).dim(1), 12);
  EXPECT_THROW(t.view({5, 5}), std::invalid_argument);
}

TEST(Tensor, CudaWithoutAllocatorFailsClearly) {
  // In a CPU-only binary nothing registers a CUDA allocator.
  EXPECT_THROW(Tensor::empty({4}, DType::kF32, MemCategory::kOther, Device::kCUDA),
               std::runtime_error);
}

// A host allocator that counts what it hands out and gets back.
class CountingAllocator : public Allocator {
 public:
  void* allocate(int64_t bytes) override {
    live += bytes;
    return std::malloc(static_cast<size_t>(bytes > 0 ? bytes : 1));
  }
  void deallocate(void* p, int64_t bytes) override {
    live -= bytes;
    std::free(p);
  }
  int64_t live = 0;
};

// empty_from takes its bytes from the allocator given, gives them back to it, counts them in the
// tracker like empty(), and leaves the registered allocator to every other tensor.
TEST(Tensor, EmptyFromUsesTheGivenAllocatorOnly) {
  auto& mt = MemoryTracker::instance();
  CountingAllocator counting;
  const int64_t before = mt.current(MemCategory::kCommBuffers);
  {
    Tensor t = Tensor::empty_from(counting, {6}, DType::kF32, MemCategory::kCommBuffers);
    Tensor other = Tensor::empty({5}, DType::kF32, MemCategory::kCommBuffers);
    EXPECT_EQ(counting.live, 24);
    EXPECT_EQ(mt.current(MemCategory::kCommBuffers) - before, 24 + 20);
    EXPECT_EQ(t.device(), Device::kCPU);
    t.fill(2.0f);
    EXPECT_EQ(t.f32()[5], 2.0f);
  }
  EXPECT_EQ(counting.live, 0);
  EXPECT_EQ(mt.current(MemCategory::kCommBuffers), before);
}

}  // namespace
}  // namespace llmp
