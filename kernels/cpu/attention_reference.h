// A test reference: out = P V of causal attention, summed in double, for tests that hold P fixed
// (P from one kernel, the product checked in another: kernels/cpu/attention_operands_test,
// kernels/cuda/matmul_operands_twin_test).
//
//   out[b, t, h·hs + c] = Σ_{j ≤ t} P[b, h, t, j] · V[b, j, h·hs + c],   V = qkv[..., 2C:3C]
//
// Layouts as kernels/cpu/attention.h: P (B,H,T,T), qkv (B,T,3C), out (B,T,C), hs = C/H.
#pragma once

#include <cstdint>
#include <vector>

namespace llmp {
namespace testing {

inline std::vector<double> attention_pv_reference(const float* P, const float* qkv, int B, int T,
                                                  int C, int H) {
  const int hs = C / H;
  std::vector<double> out(static_cast<size_t>(B) * T * C, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < hs; ++c) {
          double y = 0;
          for (int j = 0; j <= t; ++j)
            y += static_cast<double>(P[((int64_t{b} * H + h) * T + t) * T + j]) *
                 qkv[(int64_t{b} * T + j) * 3 * C + 2 * C + h * hs + c];
          out[(int64_t{b} * T + t) * C + h * hs + c] = y;
        }
  return out;
}

}  // namespace testing
}  // namespace llmp
