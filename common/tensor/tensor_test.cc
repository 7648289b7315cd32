#include "common/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

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

// copy_strided is every re-layout's copy (Ulysses' head split, the sequence-parallel gather): a
// column block of a (rows, cols) matrix into a dense one and back, in 16 bits too (the runs are
// counted in elements of the tensors' dtype, not bytes).
TEST(Tensor, CopyStridedMovesEachRunAndNothingElse) {
  const int64_t rows = 5, cols = 7, w = 3, c0 = 2;  // columns [2, 5) of a (5, 7) matrix
  Tensor m = Tensor::empty({rows, cols});
  for (int64_t i = 0; i < m.numel(); ++i) m.f32()[i] = static_cast<float>(i);
  Tensor block = Tensor::zeros({rows, w});
  copy_strided(block, {0, w}, m, {c0, cols}, w, rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < w; ++c)
      EXPECT_EQ(block.f32()[r * w + c], m.f32()[r * cols + c0 + c]) << "row " << r << ", col " << c;
  Tensor back = Tensor::zeros({rows, cols});
  copy_strided(back, {c0, cols}, block, {0, w}, w, rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_EQ(back.f32()[r * cols + c], c >= c0 && c < c0 + w ? m.f32()[r * cols + c] : 0.0f)
          << "row " << r << ", col " << c;
  Tensor h = Tensor::zeros({4, 4}, DType::kBF16), h2 = Tensor::zeros({4, 2}, DType::kBF16);
  for (int64_t i = 0; i < 16; ++i) h.data<uint16_t>()[i] = static_cast<uint16_t>(100 + i);
  copy_strided(h2, {0, 2}, h, {1, 4}, 2, 4);  // columns 1, 2 of each row
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 2; ++c)
      EXPECT_EQ(h2.data<uint16_t>()[r * 2 + c], 100 + r * 4 + 1 + c) << "row " << r << ", col " << c;
}

TEST(Tensor, CopyStridedRefusesRunsOutsideOrOverlappingByName) {
  Tensor a = Tensor::zeros({20}), b = Tensor::zeros({20});
  auto message = [&](StridedRuns d, StridedRuns s, int64_t width, int64_t rows,
                     const Tensor& dst, const Tensor& src) {
    try {
      copy_strided(dst, d, src, s, width, rows);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({0, 5}, {0, 5}, 5, 4, a, b), "no error");  // the whole of each, exactly
  EXPECT_EQ(message({0, 5}, {1, 5}, 5, 4, a, b),
            "copy_strided: src runs (offset 1, stride 5, width 5, rows 4) end at element 21, "
            "past the 20 of (20,) f32 cpu");
  EXPECT_EQ(message({0, 2}, {0, 5}, 3, 4, a, b),
            "copy_strided: dst runs (offset 0, stride 2, width 3, rows 4) overlap: stride < width");
  EXPECT_EQ(message({-1, 5}, {0, 5}, 1, 2, a, b),
            "copy_strided: dst runs (offset -1, stride 5, width 1, rows 2): negative offset or "
            "stride");
  EXPECT_EQ(message({0, 5}, {0, 5}, -1, 2, a, b),
            "copy_strided: width -1, rows 2 (neither may be negative)");
  EXPECT_EQ(message({10, 1}, {0, 1}, 1, 10, a.narrow(0, 20), a.narrow(0, 20)), "no error");
  EXPECT_EQ(message({5, 5}, {0, 5}, 5, 2, a, a),
            "copy_strided: the dst runs of (20,) f32 cpu overlap the src runs of (20,) f32 cpu in "
            "memory");
  EXPECT_EQ(message({0, 5}, {0, 5}, 5, 2, a, Tensor::zeros({20}, DType::kBF16)),
            "copy_strided: (20,) bf16 cpu into (20,) f32 cpu (one dtype, one device)");
  EXPECT_EQ(message({0, 5}, {100, 5}, 0, 2, a, b), "no error");  // nothing to copy
}

// swap_leading_dims (a, b, rest) -> (b, a, rest), by either loop (a ≤ b: over a; a > b: over b),
// against the index formula; a shape that does not divide is refused by name.
TEST(Tensor, SwapLeadingDimsTransposesTheTwoLeadingDimensionsEitherWay) {
  for (const auto& [a, b] : {std::pair<int64_t, int64_t>{2, 3}, {3, 2}, {1, 4}, {4, 1}}) {
    const int64_t rest = 5;
    Tensor in = Tensor::empty({a, b, rest}), out = Tensor::zeros({b, a, rest});
    for (int64_t i = 0; i < in.numel(); ++i) in.f32()[i] = static_cast<float>(i);
    swap_leading_dims(out, in, a, b);
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t e = 0; e < rest; ++e)
          EXPECT_EQ(out.f32()[(j * a + i) * rest + e], in.f32()[(i * b + j) * rest + e])
              << "a " << a << ", b " << b << " at (" << i << ", " << j << ", " << e << ")";
  }
  Tensor x = Tensor::zeros({12}), y = Tensor::zeros({12});
  try {
    swap_leading_dims(y, x, 5, 2);
    ADD_FAILURE() << "no error for (5, 2, ·) of 12 elements";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "swap_leading_dims: (5, 2, ·) of (12,) f32 cpu into (12,) f32 cpu");
  }
  EXPECT_THROW(swap_leading_dims(Tensor::zeros({6}), x, 3, 2), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
