// Report rows of recomputation (see recompute_report.h).
#include "common/train/recompute_report.h"

#include <stdexcept>
#include <string>

#include "common/nn/moe_routing.h"
#include "common/plan/recompute_formulas.h"

namespace llmp {

double moe_recomputed_flops(const GPTConfig& model, int64_t b, int T) {
  if (model.experts == 0)
    throw std::invalid_argument("moe_recomputed_flops: model '" + model.name + "' has no experts");
  const int Lm = model.moe_blocks();
  RecomputeDims dense{b, T, model.d, model.heads, model.layers - Lm};
  dense.flash = model.attention == AttentionMethod::kFlash;
  const int cap = expert_capacity(model.top_k, T, model.capacity_factor, model.experts);
  return recomputed_flops_per_walk(dense, Recompute::kFull) +
         Lm * moe_block_forward_flops(b, T, model.d, model.experts, model.top_k, cap, dense.flash);
}

std::vector<ReportRow> recompute_rows(const GPTConfig& model, const GridShape& grid,
                                      int global_batch, int T, int act_bytes,
                                      const RecomputeMeter& meter) {
  std::vector<ReportRow> rows;
  const Recompute policy = model.recompute;
  const int every = model.recompute_every;
  const bool flash = model.attention == AttentionMethod::kFlash;
  // Without recomputation or flash attention: the stages' own tables, unchanged.
  if (policy == Recompute::kNone && !flash) return rows;
  if (grid.tp == 1 && meter.forward_blocks > 0) {
    RecomputeDims walk{meter.forward_batch, T, model.d, model.heads, meter.forward_blocks};
    walk.flash = flash;
    double kept = activation_bytes_per_block(walk, policy, every, act_bytes);
    std::string text = activation_formula_text(policy, every, act_bytes, flash);
    if (model.experts > 0 && policy != Recompute::kFull) {
      // A mixture of experts: the average over its L_d dense and L_m MoE blocks.
      const int L = model.layers, Lm = model.moe_blocks();
      const int cap = expert_capacity(model.top_k, T, model.capacity_factor, model.experts);
      kept = ((L - Lm) * kept + Lm * moe_block_activation_bytes(walk, policy, act_bytes,
                                                                 model.experts, model.top_k, cap)) /
             L;
      text = "(L_d·" + text + " + L_m·MoE block)/L";
    }
    rows.push_back({std::string("activations kept per block (") + to_string(policy) +
                        (every > 1 ? ", every " + std::to_string(every) : std::string()) +
                        (flash ? ", flash attention" : "") + ")",
                    meter.bytes_per_block(), kept, text});
  }
  if (policy == Recompute::kNone) return rows;  // nothing recomputed
  if (model.cpu_checkpoints && policy == Recompute::kFull && grid.tp == 1) {
    // Pa+cpu: every checkpoint of the step went down once (and up once: unit_runner.cc).
    const int blocks = model.layers / grid.pp, kept = (blocks + every - 1) / every;
    rows.push_back({"checkpoints copied to the host per step (and back)",
                    static_cast<double>(meter.checkpoint_bytes_down),
                    double(kept) * (global_batch / grid.dp) * T * model.d * act_bytes,
                    "⌈L/(pp·k)⌉·b·s·h·" + std::to_string(act_bytes) + ", b = B/dp"});
  }
  if (model.experts > 0 && policy == Recompute::kFull) {  // whole MoE blocks run again
    rows.push_back({"recomputed forward FLOPs per step",
                    static_cast<double>(meter.recomputed_flops),
                    moe_recomputed_flops(model, global_batch / grid.dp, T),
                    moe_recomputed_flops_text(), /*flops=*/true});
  } else {
    RecomputeDims step{global_batch / grid.dp, T, model.d, model.heads, model.layers / grid.pp,
                       grid.tp};
    step.flash = flash;
    rows.push_back({"recomputed forward FLOPs per step",
                    static_cast<double>(meter.recomputed_flops),
                    recomputed_flops_per_walk(step, policy),
                    policy == Recompute::kSelective ? "L/pp·2bs²h/tp, b = B/dp"
                    : flash ? "L/pp·(24bsh²+3bs²h)/tp, b = B/dp (flash)"
                            : "L/pp·(24bsh²+2bs²h+bs(s+1)h)/tp, b = B/dp",
                    /*flops=*/true});
  }
  return rows;
}

}  // namespace llmp
