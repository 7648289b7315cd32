// A process-wide count of the floating-point operations the GEMM-like kernels ran.
//
// Each product kernel (matmul.cc, attention.cc) adds, as it runs, 2 FLOPs per multiply-add it
// performs on its actual dimensions: 2·N·C·OC for (N,C) @ (C,OC), and for attention's causal
// products what is computed: the full (T,T) square of Q Kᵀ, the lower triangle of P V. Element-wise
// work (LayerNorm, GELU, softmax, residuals) is not counted, as in the model-FLOPs convention of
// Narayanan et al. 2021 (§5.1) and Korthikanti et al. 2022 (§6).
//
// It is how a stage MEASURES what recomputation cost (common/nn/recompute.h: CountRecomputedFlops
// reads it around the forwards a walk runs again), instead of multiplying a formula by a count it
// also made. One process is one
// rank; the counter is atomic so that a helper thread cannot corrupt it.
//
// Glossary: N rows, C inputs, OC outputs, T sequence, hs head size.
#pragma once

#include <atomic>
#include <cstdint>

namespace llmp {
namespace cpu {

/// The counter itself (FLOPs since the process started).
inline std::atomic<int64_t>& flop_counter() {
  static std::atomic<int64_t> n{0};
  return n;
}
/// FLOPs run so far by this process's product kernels.
inline int64_t flops_done() { return flop_counter().load(std::memory_order_relaxed); }
/// Called by a kernel: `n` more FLOPs ran.
inline void count_flops(int64_t n) { flop_counter().fetch_add(n, std::memory_order_relaxed); }

}  // namespace cpu
}  // namespace llmp
