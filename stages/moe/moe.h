// Expert parallelism × data parallelism over the same ranks: the MoE stage's strategy.
//
// W ranks; the experts of every MoE block are split over ep of them (the expert-parallel group,
// adjacent ranks), the model's other tensors ("dense": embeddings, attention, LayerNorms,
// router, dense MLPs) are replicated on all W, and every rank reads its own B/W sequences
// (GShard, Lepikhin et al. 2020, §2.3; Switch Transformer, Fedus et al. 2021, §2.2 and Fig. 9;
// DeepSpeed-MoE's expert-data parallelism). One step:
//
//   1. forward and backward of this rank's B/W sequences with loss scale 1/(B·T); each MoE block
//      sends its tokens to their experts' ranks and back (common/nn/moe.h):
//                                      4 all_to_alls per MoE block, each sends (ep-1)/ep·4·E·G·cap·C
//   2. dense gradients: all_reduce (sum) over all W ranks, which all computed them from their own
//      tokens with the same weights:                                  sends 2(W-1)/W·4Ψ_d
//   3. expert gradients: each expert's rank already holds the gradient from EVERY token of its
//      expert-parallel group, because the all_to_alls brought those tokens to it. With ep = W
//      that is the whole global batch: no reduction at all. With ep < W the W/ep groups (the
//      expert-data-parallel group: the ranks holding the same experts) each saw B·ep/W
//      sequences, so they all_reduce (sum) over it:                   sends 2(D-1)/D·4Ψ_x
//   4. --clip_grad: the global norm, each dense tensor counted by rank 0 and each expert by the
//      first rank holding it, summed over all W ranks (common/optim/grad_clip.h);
//   5. AdamW on this rank's Ψ_d + Ψ_x parameters.
//
// Mixed precision (--precision bf16 / fp16, common/train/mixed_precision.h), as naive DP: 16-bit
// parameters and gradients (2 + 2 bytes per Ψ_d + Ψ_x) and activations, the fp32 master copy with
// m and v (12); both gradient all_reduces at 2 bytes an element. The all_to_alls move the tokens
// in 16 bits (2·E·G·cap·C bytes a buffer: half of fp32's); the router and the combine compute
// in fp32 (Switch Transformer's selective precision, common/nn/moe.cc). fp16's overflow skip is
// agreed over all W ranks, each checking the elements it owns (those --clip_grad counts).
//
// Grid: dp × pp × tp = W/ep × 1 × ep, the expert-parallel group in the tensor-parallel slot (ranks
// r·ep .. r·ep+ep-1) and the expert-data-parallel group in the data-parallel slot. W = 4, ep = 2:
//   expert-parallel groups {0,1} {2,3} (each holds all E experts, E/2 per rank);
//   expert-data-parallel groups {0,2} {1,3} (the same experts; their gradients all_reduced);
//   the dense all_reduce over {0,1,2,3}.
//
// Glossary: W ranks, ep expert-parallel ranks, D = W/ep, B global batch, G = B/W sequences per
// rank, T sequence length, E experts, k, c, cap = ⌈k·T·c/E⌉, C channels, L_m MoE blocks,
// Ψ_d dense parameters, Ψ_x = L_m·(E/ep)·(8C² + 5C) this rank's expert parameters, e bytes per
// activation element (4 in fp32, 2 in bf16/fp16).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/comm/grid.h"
#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/nn/recompute.h"
#include "common/optim/adamw.h"
#include "common/optim/grad_clip.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"
#include "stages/moe/expert_parallel_comm.h"

namespace llmp {

/// The parameters of a rank, by closed form: Ψ_d = (V+ctx)·C + L_d·(12C²+13C) +
/// L_m·(4C²+8C+CE) + 2C dense, and Ψ_x = L_m·(E/ep)·(8C²+5C) expert parameters.
struct MoeParamCounts {
  double dense = 0, experts = 0;
  static MoeParamCounts of(const GPTConfig& c, int ep);
};

/// all_to_all bytes one rank sends per training step: 4·L_m·(ep-1)/ep·e·E·G·cap·C, e bytes per
/// element (4: fp32, 2: bf16/fp16); under full recomputation (c.recompute) each MoE block's
/// forward runs again, its dispatch and return with it: 6·L_m·(ep-1)/ep·e·E·G·cap·C.
double moe_all_to_all_bytes(const GPTConfig& c, int ep, int G, int T, int e = 4);

class ExpertParallelStrategy : public MixedPrecisionStrategy {
 public:
  /// Collective over grid.world(). `grid`: W/ep × 1 × ep (expert_parallel_grid). `model`: the
  /// whole MoE model, its activations in mp's storage dtype (f32, bf16 or f16). Throws
  /// std::invalid_argument when the model has no experts or ep does not divide E, and as
  /// MixedPrecision's constructor (activations not in mp's dtype).
  ExpertParallelStrategy(const GPT& model, ProcessGrid& grid, AdamWConfig opt, uint64_t seed,
                         MixedPrecisionConfig mp = {});

  /// Sequences [r·B/W, (r+1)·B/W) of world rank r.
  BatchSlice batch_slice(int global_batch) const override;
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Parameters, gradients, optimizer state (4, 4, 8 bytes per Ψ_d + Ψ_x; mixed: 2, 2, 12);
  /// all_to_all, dense all_reduce and expert all_reduce bytes of the last step (mixed: at 2
  /// bytes an element), each next to its closed form.
  std::vector<ReportRow> report() const override;
  /// --recompute: report() carries the recomputation rows, from recompute_rows with this stage's
  /// walk (B/W sequences per rank, every product whole: grid W × 1 × 1), not its grid's tp = ep.
  bool reports_recomputation() const override { return true; }
  /// Prints the last step's routing over the global batch (moe_report.h).
  void finish() override;

  /// The last training step's routing statistics summed over the global batch (every rank).
  const MoeStats& last_routing() const { return last_routing_; }
  const GPT& model() const { return model_; }
  int ep() const { return ep_comm_.size(); }
  /// The working copy of this rank's parameters (16-bit under mixed precision).
  const Tensor& params_tensor() const { return params_; }

 private:
  ProcessGroup& world_;
  ProcessGroup& edp_;                  // expert-data-parallel group (W/ep ranks)
  std::shared_ptr<ProcessGroup> ep_;   // the expert-parallel group, its all_to_alls only
  ExpertParallelComm ep_comm_;
  GPT model_;
  std::vector<std::pair<int64_t, int64_t>> dense_, expert_;  // [offset, numel) runs of the buffer
  int64_t dense_numel_ = 0, expert_numel_ = 0;
  Tensor params_, grads_;       // in mp_.dtype()
  AdamW opt_;
  // The elements this rank owns: those it counts in ‖g‖ (--clip_grad: clip_, the base's, sums
  // their squares over the world) and checks for fp16's overflow (agreed over the world).
  OwnedRanges owned_;
  MetricsReducer metrics_;
  std::shared_ptr<ProcessGroup> book_;  // state gathering, not counted as training traffic
  MoeStats last_routing_;
  RecomputeMeter last_meter_;  // what the last step's walk kept and recomputed
  int last_G_ = 0, last_T_ = 0;
  double last_a2a_ = 0, last_dense_ = 0, last_expert_ = 0;
};

/// The stage's grid: dp = W/ep (expert-data parallel), pp = 1, tp = ep (expert parallel).
GridShape expert_parallel_grid(int world_size, int ep);

}  // namespace llmp
