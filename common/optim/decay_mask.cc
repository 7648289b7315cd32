// Decay ranges of a GPT layout (see decay_mask.h).
#include "common/optim/decay_mask.h"

#include <algorithm>

namespace llmp {

std::vector<ElementRange> decay_ranges(const GPTLayout& layout, DecayRule rule) {
  std::vector<ElementRange> out;
  for (const ParamSpec& p : layout.params()) {
    if (rule == DecayRule::kMatrices && p.shape.size() < 2) continue;  // bias, LayerNorm
    if (!out.empty() && out.back().end == p.offset)
      out.back().end += p.numel;  // adjacent to the previous decayed tensor
    else
      out.push_back({p.offset, p.offset + p.numel});
  }
  return out;
}

std::vector<ElementRange> slice_ranges(const std::vector<ElementRange>& ranges, int64_t begin,
                                       int64_t count, int64_t to) {
  std::vector<ElementRange> out;
  const int64_t end = begin + count;
  for (const ElementRange& r : ranges) {
    const int64_t b = std::max(r.begin, begin), e = std::min(r.end, end);
    if (b < e) out.push_back({b - begin + to, e - begin + to});
  }
  return out;
}

}  // namespace llmp
