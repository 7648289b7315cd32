// Finite-difference gradient checking (test helper).
//
// For a scalar loss L(p) and an analytic gradient g = ∂L/∂p from a backward pass, the central
// difference  (L(p + ε·e_i) - L(p - ε·e_i)) / 2ε  approximates g_i with error O(ε²) plus the
// rounding noise of L divided by 2ε. The kernels compute in f32 (L accumulated in double), so ε
// is a compromise: 1e-2..1e-3 for O(1) inputs. Reported error per entry:
//   rel_i = |g_i - num_i| / max(|g_i|, |num_i|, floor)
// where `floor` keeps entries whose gradient is ~0 from turning rounding noise into a huge ratio.
//
// Glossary: p parameter (or input) buffer, g analytic gradient, ε step, num numerical gradient.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llmp {
namespace testing {

struct GradCheckResult {
  double max_rel_err = 0;  ///< largest rel_i over the checked entries
  int64_t worst_index = -1;
  double worst_analytic = 0, worst_numeric = 0;
  int checked = 0;
};

/// Checks `analytic[i]` against central differences of `loss` in p[i], for every i < n when
/// n <= max_samples, else for max_samples indices drawn deterministically. p is restored.
GradCheckResult check_grad(float* p, const float* analytic, int64_t n,
                           const std::function<double()>& loss, float eps, int max_samples,
                           double floor);

/// Same check at the given indices of p.
GradCheckResult check_grad_at(float* p, const float* analytic, const std::vector<int64_t>& indices,
                              const std::function<double()>& loss, float eps, double floor);

/// Up to `k_random` deterministic random indices of [0,n) plus the `k_largest` indices with the
/// largest |analytic| (where a dropped term shows most clearly above f32 noise); no duplicates.
std::vector<int64_t> sample_indices(const float* analytic, int64_t n, int k_random, int k_largest,
                                    uint64_t seed);

/// Folds r into acc (keeps the worse of the two).
void merge(GradCheckResult* acc, const GradCheckResult& r);

/// Prints "<name>: max rel err 1.2e-04 over 40 entries (worst i=7: analytic .. numeric ..)".
void print_result(const std::string& name, const GradCheckResult& r);

/// Deterministic pseudo-random floats in [lo, hi) (splitmix64), for test inputs.
void fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi);

}  // namespace testing
}  // namespace llmp
