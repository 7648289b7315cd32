// GELU (tanh) forward/backward (see gelu.h). Eigen's array tanh() is vectorised for float (a
// rational approximation, accurate to a few ulp), where std::tanh in a loop would be one libm call
// per element: for the mini model that is the difference between ~1 ms and ~15 ms per step.
// Work goes in chunks of kChunk elements so the temporaries stay in L1.
#include "kernels/cpu/gelu.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

namespace llmp {
namespace cpu {
namespace {
using Arr = Eigen::Map<Eigen::ArrayXf>;
using CArr = Eigen::Map<const Eigen::ArrayXf>;
constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
constexpr float kCubic = 0.044715f;
constexpr long kChunk = 1024;
}  // namespace

void gelu_forward(float* y, const float* x, long N) {
  Eigen::Array<float, kChunk, 1> t;
  for (long i = 0; i < N; i += kChunk) {
    const long n = std::min(kChunk, N - i);
    CArr xs(x + i, n);
    auto th = t.head(n);
    th = (kSqrt2OverPi * (xs + kCubic * xs.cube())).tanh();  // tanh(u)
    Arr(y + i, n) = 0.5f * xs * (1.0f + th);
  }
}

void gelu_backward(float* dx, const float* x, const float* dy, long N) {
  Eigen::Array<float, kChunk, 1> t;
  for (long i = 0; i < N; i += kChunk) {
    const long n = std::min(kChunk, N - i);
    CArr xs(x + i, n), dys(dy + i, n);
    auto th = t.head(n);
    th = (kSqrt2OverPi * (xs + kCubic * xs.cube())).tanh();  // tanh(u)
    // gelu'(x) = ½(1 + t) + ½·x·(1 - t²)·√(2/π)·(1 + 3·0.044715·x²)
    Arr(dx + i, n) = dys * (0.5f * (1.0f + th) + 0.5f * xs * (1.0f - th.square()) * kSqrt2OverPi *
                                                     (1.0f + 3.0f * kCubic * xs.square()));
  }
}

}  // namespace cpu
}  // namespace llmp
