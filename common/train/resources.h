// Resource checks before any rank starts: will this run fit in memory, and are there cores enough
// for its ranks? A configuration that cannot fit (--layers 1000000, --global_batch 2147483644)
// must end with one line and exit 2 before anything is allocated, never with std::bad_alloc, a
// std::length_error, the kernel's OOM killer or hours of swapping.
//
// The estimate is the project's own closed forms (common/plan), per rank, in bytes, by
// --precision (fp32: 4-byte parameters, gradients and activations, K = 8; bf16 / fp16: 2-byte
// ones and K = 12, Precision::mixed_adam()):
//   model states  plan_memory(stage, Ψ_r, dp, precision): (4+4+8)Ψ_r = 16Ψ_r or (2+2+12)Ψ_r =
//                 16Ψ_r (every rank holds its part whole: baseline, DDP, naive DP, pipelines,
//                 TP), or ZeRO-1/2/3's sharded rows (e.g. ZeRO-3 (2+2+12)⌈Ψ/N⌉). A pipeline
//                 in bf16/fp16 keeps fp32 gradients (common/pipeline/pipeline_strategy.h):
//                 18Ψ_r, of which the estimate's 16Ψ_r is a lower bound, as the whole is;
//                 Ψ_r = tp_params_per_rank with ⌈L/pp⌉ blocks (the rank with the embeddings).
//   activations   ⌈L/pp⌉ · A_block + 4·b·T·V/t (the logits, fp32 in every precision), where
//                 A_block = tp_activation_bytes_per_block(b, T, t) = (4-byte elements) + 16bT
//                 (the LayerNorm statistics); mixed precision stores the elements in 2 bytes
//                 (common/nn/f32_view.h) and keeps the statistics fp32: A_block/2 + 8bT.
//                 --attention flash: P's 4·(a/t)·T² per sequence leaves the elements and its
//                 fp32 lse, 4·(a/t)·T, joins the statistics.
//                 b = B/dp sequences when pp = 1; a pipeline rank keeps at least one sequence
//                 (how many micro-batches it keeps is its schedule's), so b = 1 there.
//   batch         2 · 4 · (B/dp) · T: the token and target buffers train_main fills each step.
// It leaves out what the table does not know (communication buffers, the allocator's slack), so
// it is a lower bound: a run it refuses cannot fit; one it accepts may still be tight.
// Available memory: MemAvailable of /proc/meminfo divided by the ranks on this machine (all of
// them: train_main launches every rank here). The estimate is computed in double, so no flag
// value overflows it; the one integer product that could, a rank's tokens (B/dp)·T, which the
// batch buffers index with int, is an int64 product checked against INT32_MAX.
//
// Cores: more ranks than kMaxRanksPerCore (4, common/runtime/flags.h) per core are refused unless
// --oversubscribe; more ranks than cores print one warning line (the test suite runs 4 ranks on
// 2 cores by design: the stages teach with logical quantities where wall-clock cannot show them).
//
// Glossary: Ψ_r parameters per rank, L layers, C channels, H heads, V vocabulary, T sequence
// length (the preset's ctx), B global batch, dp/pp/tp the grid, b sequences per forward.
#pragma once

#include <cstdint>
#include <string>

#include "common/comm/grid.h"
#include "common/nn/gpt.h"
#include "common/plan/memory_planner.h"
#include "common/runtime/flags.h"

namespace llmp {

/// Per-rank bytes by the closed forms above.
struct RankMemoryEstimate {
  double params_per_rank = 0;  ///< Ψ_r
  double model_states = 0, activations = 0, batch = 0;
  double total() const { return model_states + activations + batch; }
};

/// The estimate for `mc` trained with `cfg` (its --precision included) on `grid`, the model
/// states by the `stage` row of common/plan/memory_planner.h (kBaseline for every stage that is
/// not a ZeRO stage). Throws std::invalid_argument for a precision other than fp32, bf16, fp16.
RankMemoryEstimate estimate_rank_memory(const GPTConfig& mc, const TrainConfig& cfg,
                                        GridShape grid, DPStage stage);

/// The memory_planner row named `stage_name` ("zero1" -> kZeRO1, "ddp" -> kDDP); kBaseline
/// for a stage that has none (pipelines, tensor parallelism: every rank holds its part whole).
DPStage dp_stage_of(const std::string& stage_name);

/// MemAvailable of /proc/meminfo in bytes; -1 when it cannot be read.
int64_t mem_available_bytes();

/// CPUs this process may run on (sched_getaffinity), else std::thread::hardware_concurrency(),
/// else 1.
int usable_cores();

/// "" when the estimate fits `available` bytes shared by `ranks`, else one line (no "error: ")
/// naming the estimate, its parts and the available memory. available < 0: "" (unknown).
std::string memory_error(const RankMemoryEstimate& e, int64_t available, int ranks,
                         const std::string& what);

/// "" when `ranks` fit `cores` (at most kMaxRanksPerCore per core, or oversubscribe), else one
/// line naming both numbers and --oversubscribe.
std::string oversubscription_error(int ranks, int cores, bool oversubscribe);

/// "" when this rank's tokens, (B/dp)·T, fit the int the batch buffers are indexed with (an
/// int64 product, checked), else one line naming --global_batch.
std::string token_count_error(const TrainConfig& cfg, int T, GridShape grid);

/// memory_error, then token_count_error, for `mc` trained with `cfg` on `grid` by the stage named `stage_name`, its
/// `ranks_here` ranks on this machine sharing MemAvailable; the run named by its flags.
std::string memory_check_error(const GPTConfig& mc, const TrainConfig& cfg, GridShape grid,
                               const std::string& stage_name, int ranks_here);

/// Before launch (every rank of the job on this machine): refuses (user_error, exit 2) a run that oversubscribes the cores or cannot fit
/// in memory.
void check_resources(const GPTConfig& mc, const TrainConfig& cfg, GridShape grid,
                     const std::string& stage_name);

/// One warning line on stderr when the ranks outnumber the cores (call it once every check has
/// passed, so that a refused run prints its error line alone).
void warn_if_oversubscribed(const TrainConfig& cfg);

}  // namespace llmp
