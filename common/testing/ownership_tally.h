// Which ranks hold and which count each element of the whole model, for the tests of a layout
// that splits GPT-2 over a grid (2D/2.5D, 3D): walk every rank's layout in one process, add what
// its copy_to_full writes, then want every element held by at least one rank and counted by
// exactly one (--clip_grad's ‖g‖² over the grid sees each gradient element once). A failure names
// the GPT-2 tensor and element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/nn/gpt.h"

namespace llmp::testing {

/// The model both grid layout tests split at side q = 1, 2, 3: tiny with L = 2, H = 4 (C = 32,
/// V = 256); at q = 3 C = 72, H = 6, V = 261, which every layout's divisibility admits
/// (2D/2.5D: q | H, C, 4C, V; 3D: q | H, q² | C, q² | V).
inline GPTConfig grid_test_model(int q) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.layers = 2;
  cfg.heads = 4;
  if (q == 3) cfg.d = 72, cfg.heads = 6, cfg.vocab = 261;
  return cfg;
}

class OwnershipTally {
 public:
  explicit OwnershipTally(const GPTConfig& cfg)
      : cfg_(cfg), psi_(GPTLayout(cfg).num_params()), held_(psi_, 0), counted_(psi_, 0) {}

  /// One rank: `local_numel` floats in its buffer, `counted` its buffer's elements it counts
  /// (offset, numel pairs), `to_full(local, full)` its layout's copy_to_full.
  void add_rank(int64_t local_numel, const std::vector<std::pair<int64_t, int64_t>>& counted,
                const std::function<void(const float*, float*)>& to_full) {
    std::vector<float> ones(local_numel, 1.f), mine(local_numel, 0.f);
    for (const auto& [offset, numel] : counted) std::fill_n(mine.begin() + offset, numel, 1.f);
    std::vector<float> h(psi_, 0.f), c(psi_, 0.f);
    to_full(ones.data(), h.data());
    to_full(mine.data(), c.data());
    for (int64_t e = 0; e < psi_; ++e) held_[e] += h[e] != 0, counted_[e] += c[e] != 0;
  }

  /// Fails (naming up to 5 elements) unless every element is held and counted exactly once,
  /// else prints one line; returns how many elements more than one rank holds (the replicas the
  /// rule chose among).
  int64_t expect_each_counted_once(const std::string& what) const {
    int64_t wrong = 0, replicated = 0;
    for (int64_t e = 0; e < psi_; ++e) {
      if ((held_[e] == 0 || counted_[e] != 1) && wrong++ < 5)
        ADD_FAILURE() << what << ": " << tensor_of(e) << " held by " << held_[e]
                      << " ranks, counted " << counted_[e] << " times";
      replicated += held_[e] > 1;
    }
    EXPECT_EQ(wrong, 0) << what;
    if (wrong == 0)
      std::printf("%s: %lld elements, %lld held by more than one rank, each counted once\n",
                  what.c_str(), static_cast<long long>(psi_), static_cast<long long>(replicated));
    return replicated;
  }

 private:
  // The GPT-2 tensor holding element e of the whole model's flat buffer.
  std::string tensor_of(int64_t e) const {
    const GPTLayout whole(cfg_);
    for (const ParamSpec& s : whole.params())
      if (e >= s.global_offset && e < s.global_offset + s.numel)
        return s.name + " element " + std::to_string(e - s.global_offset);
    return "element " + std::to_string(e) + " of no tensor";
  }

  GPTConfig cfg_;
  int64_t psi_;
  std::vector<int> held_, counted_;
};

}  // namespace llmp::testing
