// The long-sequence methods the table compares, each an AttentionCore for the shared
// ContextParallelStrategy (common/cp), with the one line that says when it cannot split.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/cp/cp_strategy.h"

namespace llmp {

struct Method {
  std::string label;
  CoreFactory make;
  std::function<std::string(int T, int H, int p)> split_error;
  bool ring = false;  ///< passes blocks around a ring (ring_waits.h applies)
};

/// Ring self-attention, ring attention (balanced split) and Ulysses, in that order.
std::vector<Method> methods();

/// "144.00 MiB".
inline std::string fmt_mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace llmp
