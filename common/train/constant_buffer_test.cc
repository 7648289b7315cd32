// ConstantBuffer alone (one process, a recording collective): the chunks it cuts a gradient into
// are [Ψ - (k+1)c, Ψ - kc), each collective carries exactly those elements in order, the last
// partial chunk is flushed, the buffer's bytes are the bound and nothing grows with Ψ; and the
// flag's one-line errors. The stages' tests run it over MPI (stages/*/..._constant_buffer_test).
//
// Glossary: Ψ elements of the flat gradient, c buffer elements.
#include "common/train/constant_buffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/tensor/memory.h"

namespace llmp {
namespace {

struct Message {
  int64_t first;
  std::vector<float> values;
};

// A flat "gradient" whose element i is i + 0.5 (every element distinct), cut into units of
// these sizes; fed to `buf` unit by unit from the last unit down, as the walk finishes them.
Tensor feed(ConstantBuffer& buf, const std::vector<int64_t>& units) {
  int64_t psi = 0;
  for (int64_t n : units) psi += n;
  Tensor flat = Tensor::empty({psi}, DType::kF32);
  for (int64_t i = 0; i < psi; ++i) flat.f32()[i] = static_cast<float>(i) + 0.5f;
  int64_t top = psi;
  for (size_t u = units.size(); u-- > 0;) {
    top -= units[u];
    buf.add(top, flat.narrow(top, units[u]));
  }
  buf.flush();
  return flat;
}

ConstantBuffer::Collective record(std::vector<Message>& log) {
  return [&log](Tensor& packed, int64_t first) {
    log.push_back({first, std::vector<float>(packed.f32(), packed.f32() + packed.numel())});
  };
}

// Units 9, 25, 25, 3 (an embedding, two blocks larger than the buffer, a final LayerNorm):
// Ψ = 62, c = 10 elements (40 bytes) -> chunks [52, 62), [42, 52), ..., [2, 12), [0, 2).
TEST(ConstantBuffer, CutsTheGradientIntoChunksOfTheBoundFromTheTop) {
  std::vector<Message> log;
  ConstantBuffer buf(40, DType::kF32, record(log));
  EXPECT_EQ(buf.capacity(), 10);
  const Tensor flat = feed(buf, {9, 25, 25, 3});
  const int64_t psi = 62, c = 10;
  ASSERT_EQ(log.size(), static_cast<size_t>((psi + c - 1) / c)) << "⌈Ψ/c⌉ collectives";
  for (size_t k = 0; k < log.size(); ++k) {
    const int64_t hi = psi - static_cast<int64_t>(k) * c, lo = std::max<int64_t>(0, hi - c);
    EXPECT_EQ(log[k].first, lo) << "chunk " << k;
    ASSERT_EQ(static_cast<int64_t>(log[k].values.size()), hi - lo) << "chunk " << k;
    for (int64_t i = lo; i < hi; ++i)
      EXPECT_EQ(log[k].values[i - lo], flat.f32()[i]) << "chunk " << k << " element " << i;
  }
  EXPECT_EQ(buf.collectives(), 7);
  EXPECT_EQ(buf.elements_sent(), psi) << "every element exactly once";
}

TEST(ConstantBuffer, TheLastPartialChunkIsSentByFlush) {
  std::vector<Message> log;
  ConstantBuffer buf(40, DType::kF32, record(log));
  Tensor g = Tensor::zeros({13}, DType::kF32);
  buf.add(0, g);
  EXPECT_EQ(log.size(), 1u) << "one full chunk [3, 13)";
  buf.flush();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].first, 0);
  EXPECT_EQ(log[1].values.size(), 3u);
  buf.flush();
  EXPECT_EQ(log.size(), 2u) << "an empty buffer sends nothing";
}

// A range that is not the next one down (a gap, or out of order) starts a new message: the
// buffer must always hold one contiguous range, or a reduce_scatter_v would misplace elements.
TEST(ConstantBuffer, ARangeThatIsNotNextFlushesFirst) {
  std::vector<Message> log;
  ConstantBuffer buf(40, DType::kF32, record(log));
  Tensor g = Tensor::zeros({4}, DType::kF32);
  buf.add(20, g);
  buf.add(16, g);  // next one down: packed with [20, 24)
  buf.add(4, g);   // a gap: [16, 24) goes first
  buf.flush();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].first, 16);
  EXPECT_EQ(log[0].values.size(), 8u);
  EXPECT_EQ(log[1].first, 4);
}

// The buffer's memory is the bound (rounded down to whole elements), kCommBuffers, whatever is
// packed: Ψ 100 times the buffer changes nothing.
TEST(ConstantBuffer, HoldsTheBoundInCommBuffersWhateverTheGradient) {
  auto& mt = MemoryTracker::instance();
  const int64_t before = mt.current(MemCategory::kCommBuffers);
  mt.reset_peak();
  {
    ConstantBuffer buf(4098, DType::kBF16, [](Tensor&, int64_t) {});
    EXPECT_EQ(buf.capacity(), 2049);
    EXPECT_EQ(buf.bytes(), 4098);
    Tensor g = Tensor::zeros({100 * 2049}, DType::kBF16);
    buf.add(0, g);
    buf.flush();
    EXPECT_EQ(buf.collectives(), 100);
    EXPECT_EQ(mt.peak(MemCategory::kCommBuffers) - before, 4098);
  }
  EXPECT_EQ(mt.current(MemCategory::kCommBuffers), before) << "freed with the buffer";
  EXPECT_EQ(ConstantBuffer(4099, DType::kF32, {}).bytes(), 4096) << "whole elements only";
}

TEST(ConstantBuffer, RefusesABoundBelowOneElementAndAnotherDtype) {
  EXPECT_THROW(ConstantBuffer(3, DType::kF32, {}), std::invalid_argument);
  ConstantBuffer buf(16, DType::kF32, [](Tensor&, int64_t) {});
  EXPECT_THROW(buf.add(0, Tensor::zeros({2}, DType::kF16)), std::invalid_argument);
}

TEST(ConstantBuffer, FlagValuesAreCheckedWithOneLineNamingThem) {
  EXPECT_EQ(constant_buffer_mb_error(0.25), "");
  EXPECT_EQ(constant_buffer_bytes(0.25), 262144);
  EXPECT_EQ(constant_buffer_mb_error(0), "--constant_buffer_mb must be a finite number > 0, got 0");
  EXPECT_EQ(constant_buffer_mb_error(-1),
            "--constant_buffer_mb must be a finite number > 0, got -1");
  EXPECT_EQ(constant_buffer_mb_error(std::nan("")),
            "--constant_buffer_mb must be a finite number > 0, got nan");
  EXPECT_EQ(constant_buffer_mb_error(std::numeric_limits<double>::infinity()),
            "--constant_buffer_mb must be a finite number > 0, got inf");
  EXPECT_EQ(constant_buffer_mb_error(1e-9),
            "--constant_buffer_mb 1e-09 is 0 bytes, less than one 4-byte gradient element");
  EXPECT_EQ(constant_buffer_mb_error(2.0 / 1048576, 2), "");
}

}  // namespace
}  // namespace llmp
