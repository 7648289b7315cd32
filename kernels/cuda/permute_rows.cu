// The token permutations of a mixture of experts (see permute_rows.h).
#include "kernels/cuda/permute_rows.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"

namespace llmp {
namespace cuda {
namespace {

// Block b copies assignment a = b, b + gridDim.x, ...: `words` words of type W per row.
template <typename W>
__global__ void permute_rows_kernel(W* dst, const W* src, const int32_t* slots,
                                    int64_t assignments, int k, int64_t row_j, int64_t row_t,
                                    bool to_slots, int64_t words) {
  for (int64_t a = blockIdx.x; a < assignments; a += gridDim.x) {
    const int64_t slot = slots[a];
    if (slot < 0) continue;  // dropped by the expert's capacity
    const int64_t token_side = (a % k) * row_j + (a / k) * row_t;
    W* to = dst + (to_slots ? slot : token_side) * words;
    const W* from = src + (to_slots ? token_side : slot) * words;
    for (int64_t w = threadIdx.x; w < words; w += blockDim.x) to[w] = from[w];
  }
}

template <typename W>
void launch(void* dst, const void* src, const int32_t* slots, int64_t assignments, int k,
            int64_t row_j, int64_t row_t, bool to_slots, int64_t row_bytes) {
  const int blocks = static_cast<int>(std::min<int64_t>(assignments, kMaxBlocks));
  permute_rows_kernel<W><<<blocks, kThreads, 0, stream()>>>(
      static_cast<W*>(dst), static_cast<const W*>(src), slots, assignments, k, row_j, row_t,
      to_slots, row_bytes / static_cast<int64_t>(sizeof(W)));
  LLMP_LAUNCH_CHECK();
}

// Whether rows of row_bytes at dst and src are all aligned to `a` bytes.
bool aligned(const void* dst, const void* src, int64_t row_bytes, int a) {
  return row_bytes % a == 0 && reinterpret_cast<uintptr_t>(dst) % a == 0 &&
         reinterpret_cast<uintptr_t>(src) % a == 0;
}

}  // namespace

void permute_rows(void* dst, const void* src, const int32_t* slots, int n, int k, int64_t row_j,
                  int64_t row_t, bool to_slots, int64_t row_bytes) {
  const int64_t assignments = static_cast<int64_t>(n) * k;
  if (assignments <= 0 || row_bytes <= 0) return;
  if (aligned(dst, src, row_bytes, 4))
    launch<uint32_t>(dst, src, slots, assignments, k, row_j, row_t, to_slots, row_bytes);
  else if (aligned(dst, src, row_bytes, 2))
    launch<uint16_t>(dst, src, slots, assignments, k, row_j, row_t, to_slots, row_bytes);
  else
    launch<uint8_t>(dst, src, slots, assignments, k, row_j, row_t, to_slots, row_bytes);
}

}  // namespace cuda
}  // namespace llmp
