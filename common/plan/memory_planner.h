// Closed forms for per-rank model-state memory and per-step traffic of the data-parallel family.
//
// ZeRO (Rajbhandari et al. 2020), §5 and Table 1. With Ψ parameters, N data-parallel ranks,
// p bytes per parameter, g bytes per gradient and K bytes of optimizer state per parameter:
//
//   stage                params      gradients   optimizer    mixed precision (p=g=2, K=12)
//   baseline / DDP       pΨ          gΨ          KΨ           (2+2+K)Ψ = 16Ψ
//   ZeRO-1  (P_os)       pΨ          gΨ          KΨ/N         4Ψ + KΨ/N
//   ZeRO-2  (P_os+g)     pΨ          gΨ/N        KΨ/N         2Ψ + (2+K)Ψ/N
//   ZeRO-3  (P_os+g+p)   pΨ/N        gΨ/N        KΨ/N         (2+2+K)Ψ/N
//
// fp32 training on the CPU has p = g = 4 and K = 8 (Adam's m and v; no separate master copy).
// Sharded quantities use the padded shard ⌈Ψ/N⌉, which is what the code allocates.
//
// Traffic per step and rank, in bytes, with b = g (gradient bytes), §7 of the paper:
//   naive DP, DDP: all_reduce                      2(N-1)/N·Ψ·b
//   ZeRO-1, ZeRO-2: reduce_scatter + all_gather    2(N-1)/N·Ψ·b   (the same volume)
//   ZeRO-3: all_gather ×2 (fwd, bwd) + reduce_scatter 3(N-1)/N·Ψ·b  (1.5× DDP)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmp {

enum class DPStage { kBaseline, kNaiveDP, kDDP, kZeRO1, kZeRO2, kZeRO3 };

/// "baseline", "naive_dp", "ddp", "zero1", "zero2", "zero3".
const char* to_string(DPStage s);

/// Bytes per parameter of each model state.
struct Precision {
  double param_bytes;  ///< p
  double grad_bytes;   ///< g
  double K;            ///< optimizer-state bytes per parameter
  static Precision fp32() { return {4, 4, 8}; }             ///< CPU training, Adam m and v
  static Precision mixed_adam() { return {2, 2, 12}; }      ///< fp16/bf16 + fp32 master, m, v
};

/// Per-rank bytes of each model state.
struct MemoryPlan {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};

/// ⌈Ψ/N⌉: the padded shard every rank allocates.
int64_t shard_size(int64_t psi, int ranks);

/// Per-rank model-state bytes of `stage` for Ψ = psi parameters on N = ranks. With `padded`,
/// sharded terms use ⌈Ψ/N⌉ (what the code allocates); without, Ψ/N (the paper's table).
MemoryPlan plan_memory(DPStage stage, double psi, int ranks, Precision prec, bool padded = false);

/// Bytes one rank sends per optimizer step (one gradient sync), as in the table above.
double plan_bytes_per_step(DPStage stage, double psi, int ranks, double grad_bytes);

}  // namespace llmp
