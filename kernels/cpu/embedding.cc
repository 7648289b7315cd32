// Embedding lookup and its scatter-add backward (see embedding.h). Rows are contiguous C-vectors;
// the inner loops are plain element-wise float loops, which GCC vectorises at -O2/-O3.
#include "kernels/cpu/embedding.h"

namespace llmp {
namespace cpu {

void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                       int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const long bt = static_cast<long>(b) * T + t;
      float* __restrict o = out + bt * C;
      const float* __restrict e = wte + static_cast<long>(tokens[bt]) * C;  // token row
      const float* __restrict p = wpe + static_cast<long>(t) * C;           // position row
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                        int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const long bt = static_cast<long>(b) * T + t;
      const float* __restrict d = dout + bt * C;
      float* __restrict e = dwte + static_cast<long>(tokens[bt]) * C;
      float* __restrict p = dwpe + static_cast<long>(t) * C;
      for (int c = 0; c < C; ++c) e[c] += d[c];
      for (int c = 0; c < C; ++c) p[c] += d[c];
    }
  }
}

}  // namespace cpu
}  // namespace llmp
