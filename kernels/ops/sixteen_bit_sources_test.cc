// SixteenBitSources: an operand inside a noted buffer gets its 16-bit source at the same offset;
// one that sticks out of the buffer, another dtype, or a forgotten buffer gets nullptr.
#include "kernels/ops/sixteen_bit_sources.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace llmp {
namespace {

TEST(SixteenBitSources, AnOperandInsideANotedBufferReadsItsSourceAtTheSameOffset) {
  std::vector<float> a(100), b(50);
  std::vector<uint16_t> a16(100), b16(50);
  SixteenBitSources s;
  s.note(a.data(), a16.data(), DType::kBF16, 100);
  s.note(b.data(), b16.data(), DType::kF16, 50);
  EXPECT_EQ(s.find(a.data(), 100, DType::kBF16), a16.data());
  EXPECT_EQ(s.find(a.data() + 37, 63, DType::kBF16), a16.data() + 37);  // the last element
  EXPECT_EQ(s.find(a.data() + 37, 64, DType::kBF16), nullptr);          // one past it
  EXPECT_EQ(s.find(a.data(), 100, DType::kF16), nullptr);               // another dtype
  EXPECT_EQ(s.find(b.data() + 10, 5, DType::kF16), b16.data() + 10);
  EXPECT_EQ(s.find(a.data() - 1, 2, DType::kBF16), nullptr);            // starts before
  s.forget(a.data());
  EXPECT_EQ(s.find(a.data(), 1, DType::kBF16), nullptr);
  EXPECT_EQ(s.size(), 1u);
  s.forget(a.data());  // nothing to forget: nothing happens
  s.forget(b.data());
  EXPECT_EQ(s.size(), 0u);
}

TEST(SixteenBitSources, RefusesAnotherDtypeAndANoteTwice) {
  std::vector<float> a(4);
  std::vector<uint16_t> a16(4);
  SixteenBitSources s;
  EXPECT_THROW(s.note(a.data(), a16.data(), DType::kF32, 4), std::invalid_argument);
  s.note(a.data(), a16.data(), DType::kBF16, 4);
  EXPECT_THROW(s.note(a.data(), a16.data(), DType::kBF16, 4), std::logic_error);
}

}  // namespace
}  // namespace llmp
