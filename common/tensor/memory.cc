#include "common/tensor/memory.h"

#include <algorithm>
#include <cstdio>

namespace llmp {

const char* to_string(MemCategory c) {
  switch (c) {
    case MemCategory::kParameters: return "parameters";
    case MemCategory::kGradients: return "gradients";
    case MemCategory::kOptimizerState: return "optimizer state";
    case MemCategory::kActivations: return "activations";
    case MemCategory::kCommBuffers: return "comm buffers";
    case MemCategory::kOther: return "other";
    default: return "?";
  }
}

MemoryTracker& MemoryTracker::instance() {
  static MemoryTracker tracker;
  return tracker;
}

void MemoryTracker::on_alloc(MemCategory c, int64_t bytes, MemTag tag, Device device) {
  const int d = didx(device);
  dev_current_[d][idx(c)] += bytes;
  dev_peak_[d][idx(c)] = std::max(dev_peak_[d][idx(c)], dev_current_[d][idx(c)]);
  dev_total_[d] += bytes;
  dev_peak_total_[d] = std::max(dev_peak_total_[d], dev_total_[d]);
  tag_current_[tidx(tag)] += bytes;
  tag_peak_[tidx(tag)] = std::max(tag_peak_[tidx(tag)], tag_current_[tidx(tag)]);
  current_[idx(c)] += bytes;
  peak_[idx(c)] = std::max(peak_[idx(c)], current_[idx(c)]);
  total_ += bytes;
  peak_total_ = std::max(peak_total_, total_);
}

void MemoryTracker::on_free(MemCategory c, int64_t bytes, MemTag tag, Device device) {
  dev_current_[didx(device)][idx(c)] -= bytes;
  dev_total_[didx(device)] -= bytes;
  tag_current_[tidx(tag)] -= bytes;
  current_[idx(c)] -= bytes;
  total_ -= bytes;
}

void MemoryTracker::reset_peak() {
  peak_ = current_;
  tag_peak_ = tag_current_;
  peak_total_ = total_;
  dev_peak_ = dev_current_;
  dev_peak_total_ = dev_total_;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

}  // namespace llmp
