// Numbers as the planner prints them: bytes in GiB (or MiB/KiB when small), seconds in s, ms or
// µs, bandwidths in GB/s, and a configuration as one short label.
#pragma once

#include <cstdio>
#include <string>

#include "tools/plan/cost_model.h"

namespace llmp::plan {

inline std::string bytes_str(double b) {
  char s[32];
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(s, sizeof s, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) std::snprintf(s, sizeof s, "%.2f MiB", b / (1024.0 * 1024));
  else std::snprintf(s, sizeof s, "%.1f KiB", b / 1024.0);
  return s;
}

inline std::string secs_str(double t) {
  char s[32];
  if (t >= 1) std::snprintf(s, sizeof s, "%.3f s", t);
  else if (t >= 1e-3) std::snprintf(s, sizeof s, "%.2f ms", t * 1e3);
  else std::snprintf(s, sizeof s, "%.1f µs", t * 1e6);
  return s;
}

inline std::string gbps_str(double bw) {
  char s[32];
  std::snprintf(s, sizeof s, "%g GB/s", bw / 1e9);
  return s;
}

/// "dp 16 pp 8 tp 8 sp ZeRO-1 m 96 v 1 recompute full".
inline std::string config_str(const PlanConfig& c) {
  const HybridShape& s = c.shape;
  char out[160];
  std::snprintf(out, sizeof out, "dp %d pp %d tp %d%s ZeRO-%d m %d v %d recompute %s", s.dp, s.pp,
                s.tp, s.sp ? " sp" : "", s.zero, s.m, s.v, to_string(s.recompute));
  return out;
}

}  // namespace llmp::plan
