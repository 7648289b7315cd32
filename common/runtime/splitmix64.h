// splitmix64's finalizer (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014): a bijective 64-bit mix of x + γ (γ = 2⁶⁴/φ). The one definition that the data
// sampler (common/data/sampler.h) and the initialisation (common/nn/init.h) both draw from.
#pragma once

#include <cstdint>

namespace llmp {

/// 64 well-mixed bits of x. Pure, constexpr.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace llmp
