// all_gather_strings (see all_gather_strings.h): lengths as f64, then the bytes as u8.
//
// Glossary: N ranks in the group, n this rank's length, total = Σ_r n_r.
#include "common/comm/all_gather_strings.h"

#include <cstring>

namespace llmp {

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& mine) {
  const int N = group.size();
  const int64_t n = static_cast<int64_t>(mine.size());

  // 1. Every rank's length.
  Tensor my_len = Tensor::empty({1}, DType::kF64), lens = Tensor::empty({N}, DType::kF64);
  my_len.f64()[0] = static_cast<double>(n);
  group.all_gather(my_len, lens);  // sends (N-1)/N·8N
  std::vector<int64_t> counts(N);
  int64_t total = 0;
  for (int r = 0; r < N; ++r) counts[r] = static_cast<int64_t>(lens.f64()[r]), total += counts[r];

  // 2. The bytes, in rank order.
  Tensor bytes = Tensor::empty({n}, DType::kU8), all = Tensor::empty({total}, DType::kU8);
  if (n > 0) std::memcpy(bytes.raw(), mine.data(), n);
  group.all_gather_v(bytes, all, counts);  // sends (N-1)/N·total

  std::vector<std::string> out(N);
  const char* p = static_cast<const char*>(all.raw());
  for (int r = 0; r < N; ++r) out[r].assign(p, counts[r]), p += counts[r];
  return out;
}

}  // namespace llmp
