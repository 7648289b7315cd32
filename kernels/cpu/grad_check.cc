// Central-difference gradient checking (see grad_check.h).
#include "kernels/cpu/grad_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace llmp {
namespace testing {
namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

GradCheckResult check_grad(float* p, const float* analytic, int64_t n,
                           const std::function<double()>& loss, float eps, int max_samples,
                           double floor) {
  std::vector<int64_t> idx;
  const int64_t count = std::min<int64_t>(n, max_samples);
  for (int64_t k = 0; k < count; ++k)
    idx.push_back(n <= max_samples ? k : static_cast<int64_t>(splitmix64(k * 7919 + n) % n));
  return check_grad_at(p, analytic, idx, loss, eps, floor);
}

std::vector<int64_t> sample_indices(const float* analytic, int64_t n, int k_random, int k_largest,
                                    uint64_t seed) {
  std::vector<int64_t> all(n);
  for (int64_t i = 0; i < n; ++i) all[i] = i;
  const int64_t kl = std::min<int64_t>(k_largest, n);
  std::partial_sort(all.begin(), all.begin() + kl, all.end(), [&](int64_t a, int64_t b) {
    return std::fabs(analytic[a]) > std::fabs(analytic[b]);
  });
  std::vector<int64_t> idx(all.begin(), all.begin() + kl);
  for (int k = 0; k < k_random && static_cast<int64_t>(idx.size()) < n; ++k) {
    const int64_t i = static_cast<int64_t>(splitmix64(seed * 1000003 + k) % n);
    if (std::find(idx.begin(), idx.end(), i) == idx.end()) idx.push_back(i);
  }
  return idx;
}

void merge(GradCheckResult* acc, const GradCheckResult& r) {
  const int checked = acc->checked + r.checked;
  if (r.max_rel_err > acc->max_rel_err || acc->worst_index < 0) *acc = r;
  acc->checked = checked;
}

GradCheckResult check_grad_at(float* p, const float* analytic, const std::vector<int64_t>& indices,
                              const std::function<double()>& loss, float eps, double floor) {
  GradCheckResult r;
  for (int64_t i : indices) {
    const float saved = p[i];
    p[i] = saved + eps;
    const double lp = loss();
    p[i] = saved - eps;
    const double lm = loss();
    p[i] = saved;
    // Divide by the step actually taken (saved ± eps rounds in f32).
    const double step = static_cast<double>(saved + eps) - static_cast<double>(saved - eps);
    const double num = (lp - lm) / step, a = analytic[i];
    const double rel = std::fabs(a - num) / std::max({std::fabs(a), std::fabs(num), floor});
    if (rel > r.max_rel_err || r.worst_index < 0) {
      r.max_rel_err = rel;
      r.worst_index = i;
      r.worst_analytic = a;
      r.worst_numeric = num;
    }
    ++r.checked;
  }
  return r;
}

void print_result(const std::string& name, const GradCheckResult& r) {
  std::printf("%-28s max rel err %.3e over %d entries (worst i=%lld: analytic %.6e numeric %.6e)\n",
              name.c_str(), r.max_rel_err, r.checked, static_cast<long long>(r.worst_index),
              r.worst_analytic, r.worst_numeric);
}

void fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    const double u = (splitmix64(seed * 0x100000001B3ull + i) >> 11) * 0x1.0p-53;
    p[i] = static_cast<float>(lo + (hi - lo) * u);
  }
}

}  // namespace testing
}  // namespace llmp
