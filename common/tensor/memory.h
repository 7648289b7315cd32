// Per-rank memory accounting by category.
//
// Every Tensor's storage is registered here while it lives, under one of the categories that the
// ZeRO paper (Rajbhandari et al. 2020, §3) uses to split a rank's memory: parameters, gradients,
// optimizer state (model states), activations and communication buffers (residual states).
// Stages assert these numbers against the closed forms of common/plan/memory_planner.h.
//
// One process is one rank, so the tracker is a process-wide singleton.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace llmp {

/// What a buffer holds. kCount is the number of categories, not a category.
enum class MemCategory : int {
  kParameters = 0,
  kGradients,
  kOptimizerState,
  kActivations,
  kCommBuffers,
  kOther,
  kCount
};

/// Where a buffer lives: the host, or the GPU (one per rank; kernels/cuda's allocator). Declared
/// here, beside the tracker that counts bytes per device; common/tensor/tensor.h uses it.
enum class Device { kCPU, kCUDA };
/// Number of Device values (the tracker's per-device arrays).
constexpr int kNumDevices = 2;

/// Printable name of a category ("parameters", "gradients", ...).
const char* to_string(MemCategory c);

/// A finer label counted beside the category, for a part of it a stage must measure apart:
/// kAttentionScores, the (T x T)-sized attention scores and probabilities among the activations
/// (the T² term that the long-sequence stages shrink, stages/ring_attention). kCount is not a tag.
enum class MemTag : int { kNone = 0, kAttentionScores, kCount };

/// Bytes currently allocated and the peak since the last reset_peak(), per category and in total,
/// over all devices and per device (a --device cuda run's model states on the GPU, ZeRO-Offload's
/// optimizer state on the host: stages/zero2). Thread-compatible (one trainer thread per rank);
/// not thread-safe.
class MemoryTracker {
 public:
  static MemoryTracker& instance();

  /// Called by Storage (common/tensor/tensor.cc) for every buffer it allocates and frees.
  void on_alloc(MemCategory c, int64_t bytes, MemTag tag = MemTag::kNone,
                Device device = Device::kCPU);
  void on_free(MemCategory c, int64_t bytes, MemTag tag = MemTag::kNone,
               Device device = Device::kCPU);

  /// Bytes live now in category c.
  int64_t current(MemCategory c) const { return current_[idx(c)]; }
  /// Largest value current(c) reached since the last reset_peak().
  int64_t peak(MemCategory c) const { return peak_[idx(c)]; }
  /// Bytes live now with `tag` (any category), and their peak since the last reset_peak().
  int64_t current(MemTag tag) const { return tag_current_[tidx(tag)]; }
  int64_t peak(MemTag tag) const { return tag_peak_[tidx(tag)]; }
  /// Sum over all categories, now and at its own peak.
  int64_t current_total() const { return total_; }
  int64_t peak_total() const { return peak_total_; }
  /// The same on one device only: bytes live there now in category c, and their peak.
  int64_t current(Device d, MemCategory c) const { return dev_current_[didx(d)][idx(c)]; }
  int64_t peak(Device d, MemCategory c) const { return dev_peak_[didx(d)][idx(c)]; }
  /// Bytes live on device d now (every category), and that sum's own peak.
  int64_t current_total(Device d) const { return dev_total_[didx(d)]; }
  int64_t peak_total(Device d) const { return dev_peak_total_[didx(d)]; }
  /// Peaks restart from the current values.
  void reset_peak();

 private:
  static int idx(MemCategory c) { return static_cast<int>(c); }
  static int tidx(MemTag t) { return static_cast<int>(t); }
  static int didx(Device d) { return static_cast<int>(d); }
  using PerCategory = std::array<int64_t, static_cast<int>(MemCategory::kCount)>;
  std::array<int64_t, static_cast<int>(MemCategory::kCount)> current_{}, peak_{};
  std::array<int64_t, static_cast<int>(MemTag::kCount)> tag_current_{}, tag_peak_{};
  int64_t total_ = 0, peak_total_ = 0;
  std::array<PerCategory, kNumDevices> dev_current_{}, dev_peak_{};
  std::array<int64_t, kNumDevices> dev_total_{}, dev_peak_total_{};
};

/// Human-readable byte count: "3.18 MiB".
std::string format_bytes(double bytes);

}  // namespace llmp
