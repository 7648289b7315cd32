// The long-sequence table (main.cc): the methods it compares, each an AttentionCore for the
// shared ContextParallelStrategy (common/cp) with the one line that says when it cannot split,
// and the measurement of one row: the baseline on whole sequences, or a method on p ranks.
// Every figure comes from the run (MemoryTracker, CommStats, the wall clock). On a device
// (--device cuda) the walks run there (GPT::with_device): the peaks are device bytes and each
// timed stretch ends when the device has finished (wait_for_device).
//
// Glossary: B sequences, T positions, p ranks, H heads.
#pragma once

#include <cstdint>
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

/// The model of every row: tiny widths (L = 2, C = 32) with H = 4 heads at sequence length T.
GPTConfig table_model(int T);

/// One line of the table (bytes per rank; the largest over the ranks for a method).
struct Row {
  std::string method;
  double score_peak = 0, sent = 0, kept = 0, tokens_per_s = 0;
  double wait_ms = 0;  ///< per timed step, inside the ring cores' waits (ring_waits.h)
  int64_t calls = 0;
};

/// The baseline on this rank alone: whole sequences, one warm-up step then `timed` steps of B,
/// on `device` (parameters, gradients and activations there).
Row measure_baseline(const GPTConfig& c, int B, int timed, Device device = Device::kCPU);
/// `me` on every rank of `world` (collective), the same steps, on `device` (world then carries
/// device tensors: common/train/device_setup.h).
Row measure_method(const Method& me, const GPTConfig& c, int B, int timed, ProcessGroup& world,
                   Device device = Device::kCPU);

}  // namespace llmp
