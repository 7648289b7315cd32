// check_resources and its parts (resources.h): the per-rank memory estimate by common/plan's
// closed forms, /proc/meminfo, and the cores this process may use.
//
// Glossary: see resources.h.
#include "common/train/resources.h"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/plan/tp_formulas.h"
#include "common/runtime/check.h"
#include "common/tensor/memory.h"
#include "common/tensor/precision.h"

namespace llmp {

RankMemoryEstimate estimate_rank_memory(const GPTConfig& mc, const TrainConfig& cfg,
                                        GridShape grid, DPStage stage) {
  // Doubles throughout: --layers 2147483647 or --global_batch 2147483647 overflow no product.
  const double blocks = std::ceil(double(mc.layers) / std::max(1, grid.pp));
  const TpModelDims dims{mc.padded_vocab(), mc.ctx, static_cast<int64_t>(blocks), mc.d, mc.heads};
  // A mixture of experts (the moe stage) puts its expert-parallel group in the grid's tp slot:
  // the experts are split over it, everything else is whole.
  const int ep = mc.experts > 0 ? std::max(1, grid.tp) : 1;
  const int t = mc.experts > 0 ? 1 : std::max(1, grid.tp), dp = std::max(1, grid.dp);
  // --precision bf16 / fp16: 2-byte parameters and gradients, K = 12, 2-byte activations.
  const bool mixed = is_mixed(parse_precision(cfg.precision));
  RankMemoryEstimate e;
  e.params_per_rank = tp_params_per_rank(dims, t);
  if (mc.experts > 0) {  // a MoE block: its MLP becomes a router and E experts (E/ep on a rank)
    const double C = mc.d, mlp = 8 * C * C + 5 * C, moe_blocks = std::floor(blocks / mc.moe_every);
    e.params_per_rank += moe_blocks * (C * mc.experts + double(mc.experts) / ep * mlp - mlp);
  }
  e.model_states =
      plan_memory(stage, e.params_per_rank, dp, mixed ? Precision::mixed_adam() : Precision::fp32())
          .total();
  const double T = mc.ctx, seqs = double(cfg.global_batch) / dp;
  const double b = grid.pp > 1 ? 1.0 : seqs;
  // tp_activation_bytes_per_block is linear in its batch argument: one sequence, times b. Its
  // 16sb term is the LayerNorm statistics, fp32 in every precision; the rest is 4-byte elements,
  // stored in 2 bytes under mixed precision. The logits stay fp32 (4TV/t per sequence).
  double stats = 16.0 * T;
  double stored = tp_activation_bytes_per_block(dims, 1, mc.ctx, t, false) - stats;
  if (mc.attention == AttentionMethod::kFlash) {  // lse (fp32) where P's a·T per token stood
    stored -= 4.0 * mc.heads / t * T * T;
    stats += 4.0 * mc.heads / t * T;
  }
  e.activations =
      b * (blocks * ((mixed ? 0.5 : 1.0) * stored + stats) + 4.0 * T * mc.padded_vocab() / t);
  e.batch = 2.0 * 4.0 * seqs * T;
  return e;
}

DPStage dp_stage_of(const std::string& stage_name) {
  for (DPStage s : {DPStage::kBaseline, DPStage::kNaiveDP, DPStage::kDDP, DPStage::kZeRO1,
                    DPStage::kZeRO2, DPStage::kZeRO3})
    if (stage_name == to_string(s)) return s;
  return DPStage::kBaseline;
}

int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // the file counts kB (KiB)
  }
  return -1;
}

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string memory_error(const RankMemoryEstimate& e, int64_t available, int ranks,
                         const std::string& what) {
  if (available < 0) return "";
  const double per_rank = double(available) / std::max(1, ranks);
  if (e.total() <= per_rank) return "";
  std::ostringstream os;
  os << what << ": each rank needs at least " << format_bytes(e.total()) << " (model states "
     << format_bytes(e.model_states) << " for " << std::llround(e.params_per_rank)
     << " parameters per rank, activations " << format_bytes(e.activations) << ", batch "
     << format_bytes(e.batch) << "; common/plan's closed forms) but " << format_bytes(per_rank)
     << " is available per rank (MemAvailable " << format_bytes(double(available)) << " / "
     << ranks << (ranks == 1 ? " rank)" : " ranks)");
  return os.str();
}

std::string oversubscription_error(int ranks, int cores, bool oversubscribe) {
  if (oversubscribe || int64_t(ranks) <= int64_t(kMaxRanksPerCore) * cores) return "";
  return "--world_size " + std::to_string(ranks) + " is more than " +
         std::to_string(kMaxRanksPerCore) + " ranks per core on the " + std::to_string(cores) +
         " CPU cores this process may use (" + std::to_string(kMaxRanksPerCore * cores) +
         " at most); pass --oversubscribe to run them anyway";
}

std::string token_count_error(const TrainConfig& cfg, int T, GridShape grid) {
  // The token and target buffers are indexed with int (num_seqs · T): int64 product, checked.
  int64_t tokens = 0;
  const int64_t seqs = cfg.global_batch / std::max(1, grid.dp);
  if (!__builtin_mul_overflow(seqs, int64_t(T), &tokens) && tokens <= INT32_MAX) return "";
  return "--global_batch " + std::to_string(cfg.global_batch) + ": " + std::to_string(seqs) +
         " sequences of T=" + std::to_string(T) + " tokens per rank exceed the 2147483647 "
         "tokens one rank's batch buffers can index";
}

std::string memory_check_error(const GPTConfig& mc, const TrainConfig& cfg, GridShape grid,
                               const std::string& stage_name, int ranks_here) {
  const RankMemoryEstimate e = estimate_rank_memory(mc, cfg, grid, dp_stage_of(stage_name));
  const std::string memory =
      memory_error(e, mem_available_bytes(), ranks_here,
                   "--model " + cfg.model +
                       (cfg.layers > 0 ? " --layers " + std::to_string(cfg.layers) : "") +
                       " --global_batch " + std::to_string(cfg.global_batch) +
                       " --world_size " + std::to_string(cfg.world_size));
  // A machine with the memory for 2^31 tokens per rank still cannot index them with int.
  return memory.empty() ? token_count_error(cfg, mc.ctx, grid) : memory;
}

void check_resources(const GPTConfig& mc, const TrainConfig& cfg, GridShape grid,
                     const std::string& stage_name) {
  std::string err = oversubscription_error(cfg.world_size, usable_cores(), cfg.oversubscribe);
  if (err.empty()) err = memory_check_error(mc, cfg, grid, stage_name, cfg.world_size);
  if (!err.empty()) user_error(err);
}

void warn_if_oversubscribed(const TrainConfig& cfg) {
  const int cores = usable_cores();
  if (cfg.world_size > cores)
    std::fprintf(stderr,
                 "warning: %d ranks on %d CPU cores: ranks take turns on the cores, so wall-clock "
                 "times are slower than each rank alone\n",
                 cfg.world_size, cores);
}

}  // namespace llmp
