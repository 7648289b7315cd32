// The report rows of activation recomputation (common/nn/recompute.h), the same for every stage:
// what the last step's walk kept per block and what it recomputed, measured (RecomputeMeter:
// MemoryTracker bytes, the kernels' FLOP counter), next to the closed forms of
// common/plan/recompute_formulas.h.
//
// A rank of a dp × pp × tp grid walks L/pp blocks (its pipeline stage's, or all of them) for
// B/dp sequences per step (its data-parallel share, in one walk or in micro-batches: the FLOPs are
// linear in the sequences), with 1/tp of every block's products (its heads, its MLP columns):
//   recomputed forward FLOPs per step = recomputed_flops_per_walk(b = B/dp, s = T, L/pp) / tp.
// Bytes per block are shown for tp = 1 (a tensor-parallel stage's report carries its own row,
// common/plan/tp_formulas.h). A mixture of experts keeps per MoE block what
// moe_block_activation_bytes says (the kept row averages its dense and MoE blocks), and under
// full recomputation runs each MoE block's forward again (moe_block_forward_flops); selective
// recomputes attention's Q Kᵀ in every block as a dense model does. The moe stage, whose grid
// puts ep in the tp slot, calls recompute_rows with its own grid W × 1 × 1 (each rank walks B/W
// sequences with every product whole: its E/ep experts multiply ep·b·cap rows each).
//
// Glossary: B global batch, T sequence, L layers, dp/pp/tp the grid's sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "common/comm/grid.h"
#include "common/nn/gpt.h"
#include "common/nn/recompute.h"
#include "common/train/strategy.h"

namespace llmp {

/// Rows for the last step's `meter` (reset before the step), none for --recompute none:
/// "activations kept per block" (tp = 1 only), with cpu_checkpoints "checkpoints copied to the
/// host per step" (tp = 1 only) and "recomputed forward FLOPs per step". `act_bytes`: bytes
/// per stored activation element (4 fp32, 2 mixed precision).
std::vector<ReportRow> recompute_rows(const GPTConfig& model, const GridShape& grid,
                                      int global_batch, int T, int act_bytes,
                                      const RecomputeMeter& meter);

/// Full recomputation of a mixture-of-experts model's L blocks for b sequences of T tokens on one
/// rank (all the blocks, every product whole): L − L_m dense blocks (recomputed_flops_per_walk)
/// and L_m MoE blocks (moe_block_forward_flops, cap from the model's k, c and E). Throws
/// std::invalid_argument for a model without experts.
double moe_recomputed_flops(const GPTConfig& model, int64_t b, int T);
/// Its formula's text.
inline const char* moe_recomputed_flops_text() {
  return "L_d·(24bsh²+attn) + L_m·(8bsh²+attn+2bshE+16h²E·b·cap+2bshk)";
}

}  // namespace llmp
