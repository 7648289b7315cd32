// The measured table of activation recomputation (common/nn/recompute.h): one training walk
// (forward and backward) of a model of L blocks per policy, on one rank, measuring what the
// sources claim (Chen et al. 2016; Korthikanti et al. 2022):
//
//   policy        activation peak grows with L like   extra forward compute
//   none          O(L): every block's whole cache      0
//   full, k = √L  O(√L): L/k inputs + one segment      one forward of every block (~1/3 of a step)
//   full          O(L) inputs only (one (B,T,C) per    one forward of every block
//                 block: the O(1)-per-block of Chen)
//   selective     O(L), without the (B,H,T,T) probs    Q Kᵀ again
//
// Every figure is measured: the peak and the bytes kept from the MemoryTracker, the recomputed
// FLOPs from the kernels' counter (kernels/cpu/flops.h), the time from a steady clock (median of
// the timed walks: a benchmark, printed, never asserted).
//
// On a device (--device cuda) the walk runs there (GPT::with_device): the peak is the device's
// activation bytes, each timed walk ends when the device has finished it (a 4-byte read of the
// gradients), and one more row measures ZeRO-R's Pa+cpu (Rajbhandari et al. 2020 §6.1:
// full recomputation with each block's checkpoint copied to host memory after its forward and
// back before its recomputation), whose device peak no longer grows by an input per block.
//
// Glossary: L blocks, k blocks per checkpointed segment, B batch, T sequence, H heads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/nn/recompute.h"
#include "common/tensor/memory.h"

namespace llmp {

/// One measured configuration.
struct RecomputeRun {
  int L = 0;
  Recompute policy = Recompute::kNone;
  int every = 1;
  bool cpu_checkpoints = false;  ///< ZeRO-R's Pa+cpu (full recomputation on a device only)
  Device device = Device::kCPU;
  int64_t peak_bytes = 0;  ///< kActivations peak on `device` during the walk, above what was live
                           ///< before
  double kept_per_block = 0;     ///< bytes the forward kept per block (RecomputeMeter)
  int64_t recomputed_flops = 0;  ///< FLOPs the recomputation ran (RecomputeMeter)
  double formula_flops = 0;      ///< recomputed_flops_per_walk (common/plan/recompute_formulas.h)
  int64_t walk_flops = 0;        ///< FLOPs of the whole walk, recomputation included (flops.h)
  int64_t checkpoint_bytes_down = 0;  ///< Pa+cpu: checkpoint bytes copied to the host per walk
  double ms = 0;                 ///< median milliseconds per walk over `timed` walks
};

/// Measures the tiny preset's widths (C = 32, H = 2, T = 16) with L blocks, B sequences, under
/// `policy` (`every`: k for full) on `device` (parameters, gradients and activations there; the
/// kernels of kernel_ops(device)): one walk for the memory and FLOPs, then `timed` timed walks.
/// cpu_checkpoints: Pa+cpu (GPTConfig::cpu_checkpoints; with kFull on a device).
/// Throws std::invalid_argument (the GPT's message) for a bad policy, and std::runtime_error
/// when `device` has no allocator or kernels (allocator_for, kernel_ops).
RecomputeRun measure_recompute(int L, Recompute policy, int every, int B, int timed,
                               Device device = Device::kCPU, bool cpu_checkpoints = false);

/// The runs of the README's table: for L in `layers`, none, full every round(√L), full and
/// selective; on a device other than the CPU also full with Pa+cpu.
std::vector<RecomputeRun> recompute_table(const std::vector<int>& layers, int B, int timed,
                                          Device device = Device::kCPU);

/// The table as Markdown: L, policy, peak (and % of none), kept per block, recomputed FLOPs
/// (measured, formula), the walk's FLOPs (× none), ms per walk (and × none).
std::string recompute_markdown(const std::vector<RecomputeRun>& runs);

}  // namespace llmp
