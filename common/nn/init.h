// Deterministic, counter-based random numbers for parameter initialisation.
//
// Draw i of stream `seed` is a pure function of (seed, i): splitmix64 (Steele, Lea & Flood 2014,
// "Fast splittable pseudorandom number generators") turns a counter into 64 random bits, and the
// Box-Muller transform (Box & Muller 1958) turns two such uniforms into a standard normal. No
// generator state is carried from one element to the next, so a rank that owns only a shard of
// the flat parameter buffer (ZeRO-3, a pipeline stage) initialises its slice to exactly the values
// a single rank would have produced for the whole model.
//
// Glossary: u1, u2 uniforms in (0,1]; z = √(-2 ln u1)·cos(2π u2) ~ N(0,1).
#pragma once

#include <cstdint>

#include "common/runtime/splitmix64.h"  // splitmix64

namespace llmp {


/// Uniform in (0,1] from the 53 high bits of splitmix64(key).
double uniform_at(uint64_t seed, uint64_t index);

/// Standard normal draw number `index` of stream `seed`: pair k = index/2 uses uniforms (2k, 2k+1);
/// even indices take the cosine branch of Box-Muller, odd ones the sine branch.
double normal_at(uint64_t seed, uint64_t index);

}  // namespace llmp
