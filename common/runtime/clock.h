// wall_seconds: the one clock that measured spans and timings read.
//
// CLOCK_MONOTONIC: it never jumps (no NTP steps, no settimeofday), and on Linux it is one clock
// for every process of a machine, so spans measured by different ranks of a single-machine job
// lie on one time axis once the ranks have passed a barrier together (the pipeline stages line
// their steps up that way). Ranks on different machines would need an offset exchange first.
// The origin is arbitrary (boot): only differences mean anything.
//
// Glossary: s = seconds.
#pragma once

#include <time.h>

namespace llmp {

/// Seconds on CLOCK_MONOTONIC (resolution 1 ns as reported by clock_getres on Linux).
inline double wall_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace llmp
