// The token permutations of a mixture of experts (see permute_rows.h).
#include "kernels/cpu/permute_rows.h"

#include <cstring>

namespace llmp {
namespace cpu {

void permute_rows(void* dst, const void* src, const int32_t* slots, int n, int k, int64_t row_j,
                  int64_t row_t, bool to_slots, int64_t row_bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const int64_t assignments = static_cast<int64_t>(n) * k;
  for (int64_t a = 0; a < assignments; ++a) {
    if (slots[a] < 0) continue;  // dropped by the expert's capacity
    const int64_t slot = slots[a], token_side = (a % k) * row_j + (a / k) * row_t;
    const int64_t to = to_slots ? slot : token_side, from = to_slots ? token_side : slot;
    std::memcpy(d + to * row_bytes, s + from * row_bytes, static_cast<size_t>(row_bytes));
  }
}

}  // namespace cpu
}  // namespace llmp
