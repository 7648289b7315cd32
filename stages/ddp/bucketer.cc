#include "stages/ddp/bucketer.h"

#include <stdexcept>
#include <string>

namespace llmp {

std::vector<Bucket> make_buckets(const GPTLayout& layout, double cap_bytes, int elem_bytes) {
  if (!(cap_bytes >= 1) || elem_bytes < 1)
    throw std::invalid_argument("bucket capacity must be >= 1 byte, got " +
                                std::to_string(cap_bytes) + " bytes (elements of " +
                                std::to_string(elem_bytes) + " bytes)");
  std::vector<Bucket> buckets;
  Bucket cur;
  bool open = false;
  // Units in the order backward finishes them: L+1, L, ..., 0.
  for (int u = layout.num_units() - 1; u >= 0; --u) {
    if (!open) cur = Bucket{0, 0, u, u}, open = true;
    cur.last_unit = u;
    cur.offset = layout.unit_offset(u);  // the bucket grows downwards in the flat buffer
    cur.numel += layout.unit_numel(u);
    if (static_cast<double>(cur.numel) * elem_bytes >= cap_bytes) buckets.push_back(cur), open = false;
  }
  if (open) buckets.push_back(cur);  // the rest, smaller than cap (it holds unit 0)
  return buckets;
}

std::vector<int> launch_unit_table(const std::vector<Bucket>& buckets, int num_units) {
  std::vector<int> table(num_units, -1);
  for (size_t b = 0; b < buckets.size(); ++b) table.at(buckets[b].last_unit) = static_cast<int>(b);
  return table;
}

}  // namespace llmp
