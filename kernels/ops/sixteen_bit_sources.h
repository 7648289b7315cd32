// Which fp32 buffers are exact widenings of which 16-bit buffers, so that a product on 16-bit
// tensor cores can read the 16-bit values where they already are.
//
// Under mixed precision the model widens a 16-bit tensor into an fp32 copy for its kernels
// (common/nn/f32_view.h F32In; FlatParams for a unit's parameters). A GPU's matmul under a 16-bit
// declaration then rounded that copy back to 16 bits in its workspace (kernels/cuda/matmul.cu):
// read 4 bytes and write 2 per element, to get back the bits the tensor had all along. With the
// widening noted here (note: "f32[0..n) = widen(src[0..n)) until forget(f32)"), find() gives the
// product the 16-bit source of an operand instead, and the copy is skipped. Nothing changes in
// the arithmetic: the source holds exactly the values the copy would have held.
//
//   sources.note(f32, src, DType::kBF16, n);             // F32In, after widening src into f32
//   const void* a16 = sources.find(A, na, DType::kBF16); // A may point inside f32: src + (A-f32)
//   sources.forget(f32);                                 // before f32 is freed
//
// A stale note (a buffer freed and its address reused without forget) would hand a product the
// wrong values; the FakeDevice's table checks every hit against the fp32 operand bit for bit in
// every device walk of the test suite (common/testing/fake_kernel_ops.cc).
//
// Glossary: n elements; "16-bit" is f16 or bf16.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"

namespace llmp {

class SixteenBitSources {
 public:
  /// f32[0..n) holds widen(src[0..n)), src of `dtype` (f16 or bf16), until forget(f32). Throws
  /// std::invalid_argument for another dtype, and std::logic_error when f32 is noted already.
  void note(const float* f32, const void* src, DType dtype, int64_t n) {
    if (dtype != DType::kF16 && dtype != DType::kBF16)
      throw std::invalid_argument(std::string("SixteenBitSources::note: dtype ") +
                                  to_string(dtype) + " is not f16 or bf16");
    for (const Entry& e : entries_)
      if (e.f32 == f32) throw std::logic_error("SixteenBitSources::note: buffer noted twice");
    entries_.push_back({f32, static_cast<const uint16_t*>(src), dtype, n});
  }
  /// Drops f32's note (nothing when it has none).
  void forget(const float* f32) {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].f32 == f32) {
        entries_[i] = entries_.back();
        entries_.pop_back();
        return;
      }
  }
  /// The 16-bit source of p[0..n) when p[0..n) lies inside one noted buffer of `dtype`: that
  /// buffer's src + (p - f32); else nullptr (the caller rounds p itself).
  const void* find(const float* p, int64_t n, DType dtype) const {
    // Addresses as integers: p may belong to no noted buffer at all (no pointer comparison
    // across unrelated arrays, no p + n past one).
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + n * sizeof(float);
    for (const Entry& e : entries_) {
      const uintptr_t b = reinterpret_cast<uintptr_t>(e.f32), end = b + e.n * sizeof(float);
      if (e.dtype == dtype && lo >= b && hi <= end && (lo - b) % sizeof(float) == 0)
        return e.src + (lo - b) / sizeof(float);
    }
    return nullptr;
  }
  /// Buffers noted now.
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    const float* f32;
    const uint16_t* src;
    DType dtype;
    int64_t n;
  };
  std::vector<Entry> entries_;
};

}  // namespace llmp
