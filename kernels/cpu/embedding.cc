// Embedding lookup and its scatter-add backward (see embedding.h). Rows are contiguous C-vectors;
// the inner loops are plain element-wise float loops, which GCC vectorises at -O2/-O3.
#include "kernels/cpu/embedding.h"

#include <cstring>

namespace llmp {
namespace cpu {

void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int v0, int Vr,
                             int N, int C) {
  for (int n = 0; n < N; ++n) {
    float* o = out + static_cast<long>(n) * C;
    const int row = tokens[n] - v0;
    if (row >= 0 && row < Vr)
      std::memcpy(o, wte + static_cast<long>(row) * C, sizeof(float) * C);  // token row
    else
      std::memset(o, 0, sizeof(float) * C);  // another rank's row
  }
}

void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int v0, int Vr,
                              int N, int C) {
  for (int n = 0; n < N; ++n) {
    const int row = tokens[n] - v0;
    if (row < 0 || row >= Vr) continue;
    const float* __restrict d = dout + static_cast<long>(n) * C;
    float* __restrict e = dwte + static_cast<long>(row) * C;
    for (int c = 0; c < C; ++c) e[c] += d[c];
  }
}

void position_embedding_forward(float* x, const float* wpe, int B, int Tl, int t0, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tl; ++t) {
      float* __restrict o = x + (static_cast<long>(b) * Tl + t) * C;
      const float* __restrict p = wpe + static_cast<long>(t0 + t) * C;  // position row
      for (int c = 0; c < C; ++c) o[c] += p[c];
    }
}

void position_embedding_backward(float* dwpe, const float* dx, int B, int Tl, int t0, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tl; ++t) {
      const float* __restrict d = dx + (static_cast<long>(b) * Tl + t) * C;
      float* __restrict p = dwpe + static_cast<long>(t0 + t) * C;
      for (int c = 0; c < C; ++c) p[c] += d[c];
    }
}

void position_embedding_forward_at(float* x, const float* wpe, int B, int Tl,
                                   const int* positions, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tl; ++t) {
      float* __restrict o = x + (static_cast<long>(b) * Tl + t) * C;
      const float* __restrict p = wpe + static_cast<long>(positions[t]) * C;
      for (int c = 0; c < C; ++c) o[c] += p[c];
    }
}

void position_embedding_backward_at(float* dwpe, const float* dx, int B, int Tl,
                                    const int* positions, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tl; ++t) {
      const float* __restrict d = dx + (static_cast<long>(b) * Tl + t) * C;
      float* __restrict p = dwpe + static_cast<long>(positions[t]) * C;
      for (int c = 0; c < C; ++c) p[c] += d[c];
    }
}

}  // namespace cpu
}  // namespace llmp
