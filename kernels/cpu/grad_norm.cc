// Σ x² in double (see grad_norm.h): Eigen widens a block of elements to double and sums their
// squares, vectorised; 16-bit elements are widened to fp32 first (exact) a chunk at a time.
#include "kernels/cpu/grad_norm.h"

#include <Eigen/Core>
#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"

namespace llmp::cpu {
namespace {

double squares_f32(const float* x, int64_t n) {
  return Eigen::Map<const Eigen::ArrayXf>(x, n).cast<double>().square().sum();
}

}  // namespace

double sum_of_squares(const void* x, DType dtype, int64_t n) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)
    throw std::invalid_argument(std::string("cpu::sum_of_squares: dtype ") + to_string(dtype) +
                                " is not f32, f16 or bf16");
  if (n <= 0) return 0.0;
  if (dtype == DType::kF32) return squares_f32(static_cast<const float*>(x), n);
  constexpr int64_t kChunk = 4096;
  float wide[kChunk];
  const char* bytes = static_cast<const char*>(x);
  double total = 0.0;
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t k = std::min(kChunk, n - i0);
    widen(bytes + i0 * dtype_size(dtype), dtype, wide, k);
    total += squares_f32(wide, k);
  }
  return total;
}

}  // namespace llmp::cpu
