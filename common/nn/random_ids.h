// Token ids for the model's tests: n ids in [0, V), a pure function of `seed` (init.h's
// counter-based uniform_at, so the same on every machine and rank).
#pragma once

#include <cstdint>
#include <vector>

#include "common/nn/init.h"

namespace llmp {

/// n token ids in [0, V): id i = ⌊uniform_at(seed, i)·V⌋ mod V.
inline std::vector<int32_t> random_ids(int n, uint64_t seed, int V) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<int32_t>(uniform_at(seed, i) * V) % V;
  return v;
}

}  // namespace llmp
