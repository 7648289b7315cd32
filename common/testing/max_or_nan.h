// max_or_nan: the running maximum of a test's differences that keeps a NaN.
//
// The usual way to take the worst difference, d = std::max(d, |a - b|), forgets a NaN:
// std::max(0.0, NaN) is 0, because every comparison with NaN is false. So a run that diverged to
// NaN (a stage whose losses and parameters are all NaN) reports a largest difference of 0 and
// passes every "difference <= bound" check. With max_or_nan the NaN stays, and gtest's
// EXPECT_LE(NaN, bound) fails, as it must. An infinity is kept by either.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmp::testing {

/// max(a, b), or NaN when either is NaN.
inline double max_or_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}

}  // namespace llmp::testing
