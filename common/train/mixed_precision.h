// Mixed-precision training for the data-parallel, pipeline and tensor-parallel stages: what
// --precision bf16 / fp16 changes in a step, in one place, so that the baseline, naive DP, DDP,
// ZeRO-1/2/3, the pipelines (common/pipeline/pipeline_strategy.h: fp32 gradients, 16-bit
// messages) and tensor/sequence parallelism (common/tp/tp_strategy.h) each add a few lines.
//
// Micikevicius et al. 2018, "Mixed Precision Training":
//
//   1. parameters, gradients and activations are stored in 16 bits (2Ψ + 2Ψ bytes); an fp32
//      MASTER copy of the weights lives in the optimizer with Adam's m and v (K = 12, §3.1);
//   2. the forward and backward compute in fp32 on 16-bit inputs and round their outputs
//      (common/nn/f32_view.h, FlatParams / FlatGrads in common/nn/unit_runner.h);
//   3. fp16 only: the loss is multiplied by S before the backward so that small gradients do not
//      underflow to zero (§3.2); after the backward, if any rank's gradients (its shard, under
//      ZeRO) hold an inf or nan, EVERY rank skips the step and S halves; after a window of clean
//      steps S doubles (the dynamic scaler of Megatron-LM and DeepSpeed: common/optim/loss_scaler.h).
//      The optimizer unscales by 1/S (exact: S is a power of two);
//   4. the optimizer updates the master copy and rounds it into the 16-bit parameters.
//
// bf16 keeps fp32's 8 exponent bits: no underflow at gradient magnitudes, no scaling (S = 1).
// fp32 runs exactly the code it ran before this existed (every call below is then a no-op or
// the plain fp32 call).
//
// Test hook: LLMP_TEST_OVERFLOW_STEP=k multiplies step k's loss scale by 2^64 (on the ranks
// listed in LLMP_TEST_OVERFLOW_RANKS=0,2, or all when unset), which makes fp16 gradients overflow
// to inf: the step must be skipped on every rank with the parameters and optimizer state left
// bit-identical.
//
// A second hook, LLMP_TEST_LOCAL_OVERFLOW_STEP=k, makes the listed ranks (the same
// LLMP_TEST_OVERFLOW_RANKS) find a non-finite gradient at step k without touching the walk: an
// overflow only they see, as one that starts inside one pipeline stage's blocks would be. Every
// rank must still skip: that is what the agreement over the group is for.
//
// Glossary: Ψ parameters, S loss scale, B global batch, T sequence length.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/optim/grad_clip.h"
#include "common/optim/loss_scaler.h"
#include "common/plan/memory_planner.h"
#include "common/runtime/flags.h"
#include "common/train/strategy.h"
#include "common/tensor/precision.h"
#include "kernels/cpu/convert.h"

namespace llmp {

struct MixedPrecisionConfig {
  TrainPrecision precision = TrainPrecision::kFP32;
  LossScalerConfig scaler;  ///< used with fp16 only
};

/// From --precision, --loss_scale (0: dynamic), --initial_loss_scale, --loss_scale_window and
/// --min_loss_scale. Throws std::invalid_argument for an unknown precision.
MixedPrecisionConfig mixed_precision_config(const TrainConfig& cfg);

/// What a checkpoint's metadata records about precision (MixedPrecision::checkpoint_state): the
/// run's precision and, for fp16, the loss scaler's state, so that a resumed fp16 run goes on
/// with the scale it had rather than starting again at --initial_loss_scale.
struct PrecisionCheckpointState {
  TrainPrecision precision = TrainPrecision::kFP32;  ///< fp32 when the file does not say
  bool has_scaler = false;                           ///< fp16 files: the three fields below
  float loss_scale = 0;                              ///< S when saved
  int64_t clean_steps = 0;                           ///< clean steps in a row when saved
  int64_t skipped_steps = 0;                         ///< steps skipped up to the save
};

/// Metadata keys (strings): "precision" ("fp32", "bf16", "fp16"); fp16 only: "loss_scale" (S,
/// shortest round-trip decimal), "loss_scale_clean_steps", "loss_scale_skipped_steps".
/// Parses them from a checkpoint's metadata. Throws std::invalid_argument naming the key and
/// its value: an unknown precision ("precision 'fp8' ..."), a scale that is not a finite number
/// > 0, a counter that is not a non-negative integer, an fp16 file missing one of the three or
/// another precision carrying them.
PrecisionCheckpointState parse_precision_state(const std::map<std::string, std::string>& md);

class MixedPrecision {
 public:
  /// `dp`: the data-parallel group whose ranks must agree on skipping a step (nullptr: one rank).
  /// Collective over dp (the agreement duplicates it). Throws std::invalid_argument when the
  /// model's activation dtype is not the precision's storage dtype.
  MixedPrecision(const GPT& model, MixedPrecisionConfig cfg, ProcessGroup* dp);

  TrainPrecision precision() const { return cfg_.precision; }
  bool mixed() const { return is_mixed(cfg_.precision); }
  /// The dtype of the parameters and gradients: f32, bf16 or f16.
  DType dtype() const { return storage_dtype(cfg_.precision); }
  /// Bytes per parameter for the memory planner: {4, 4, 8} (fp32) or {2, 2, 12} (mixed).
  Precision plan() const { return mixed() ? Precision::mixed_adam() : Precision::fp32(); }
  /// A Ψ-element tensor in dtype() (parameters or gradients, by `category`).
  Tensor new_buffer(int64_t n, MemCategory category) const;

  /// GPT initialisation from `seed` into the working copy `params` (all Ψ, rounded when 16-bit)
  /// and, with master weights, elements [master_begin, master_begin + opt.size()) (clamped to
  /// Ψ) of it in fp32 into opt.master(): a replica's, or a ZeRO shard's, master copy.
  void init(uint64_t seed, const Tensor& params, AdamW& opt, int64_t master_begin = 0) const;

  /// The loss_scale argument of this step's walk: mean_scale (1/(B·T)) times S (fp16's scale,
  /// 1 otherwise; times 2^64 on the test hook's step).
  float walk_loss_scale(float mean_scale, int64_t step) const;
  /// The walk's returned loss divided by the S it used (the true mean loss): the S of the last
  /// walk_loss_scale() call, so also after an overflowed step's optimizer_step halved S.
  double unscale_loss(double walk_loss, float mean_scale, int64_t step) const;

  /// After the gradients are final and reduced: fp16 agrees over the group whether any rank's
  /// `grads` (its whole gradient, or its shard) holds an inf or nan; if so every rank skips the
  /// step and S backs off, else AdamW updates elements [0, n) (fp32: in place; mixed: the master
  /// copy, rounded into `params`). Returns whether the step was applied. AdamW's step number is
  /// t less the steps skipped so far (its bias corrections count applied updates). Collective
  /// over dp for fp16. `clip` (when on): the gradients are clipped by the global norm first,
  /// grads[0, n) being this rank's owned part (grad_clip.h; collective over its group), the
  /// coefficient folded into AdamW's grad_scale with 1/S. `owned` (when given) replaces
  /// grads[0, n) as this rank's owned parts, for both the overflow check and the norm: a pipeline
  /// stage's owned segments of its local buffer, without the tied wte's copy (pipeline_strategy.h);
  /// it may be empty (a ZeRO shard of hybrid_3d holding none of the elements this rank counts).
  /// `grads` may be fp32 with 16-bit parameters (a pipeline's fp32 accumulation buffer).
  bool optimizer_step(AdamW& opt, const Tensor& params, const Tensor& grads, int64_t t,
                      int64_t n = -1, GradClip* clip = nullptr,
                      const std::vector<Tensor>* owned = nullptr);

  /// What rounding the gradients to 16 bits did this step (FlatGrads counts into it; reset by
  /// begin_step). Null for fp32: nothing is rounded. With the model on a device, null unless
  /// count_on_device(true): a device counts apart from its rounding (KernelOps::count_rounding,
  /// one more read of each unit's gradient and a synchronising 32-byte copy to the host per
  /// unit), which only the mixed_precision stage's report pays for; otherwise a device run's
  /// last_round_stats() stays all zeros and underflow_fraction() 0.
  cpu::RoundStats* round_stats() {
    return mixed() && (model_.device() == Device::kCPU || count_on_device_) ? &stats_ : nullptr;
  }
  /// Counts the rounding on a device too (round_stats()); the CPU always counts.
  void count_on_device(bool on) { count_on_device_ = on; }
  void begin_step() { stats_ = {}; }
  /// Of this rank's last step's gradient elements that were nonzero in fp32, the fraction that
  /// rounding to 16 bits flushed to zero (0 for fp32).
  double underflow_fraction() const;
  const cpu::RoundStats& last_round_stats() const { return stats_; }

  /// " | loss scale 32768 | skipped 2" for fp16, "" otherwise (the progress line).
  std::string step_note() const;
  float loss_scale() const { return scaler_ ? scaler_->scale() : 1.0f; }
  int64_t skipped_steps() const { return scaler_ ? scaler_->skipped_steps() : 0; }
  LossScaler* scaler() { return scaler_.get(); }

  /// Checkpoint metadata (keys above): {"precision": "bf16"}; fp16 adds the scaler's state.
  std::map<std::string, std::string> checkpoint_state() const;
  /// After the Ψ-sized state is loaded: an fp16 run restores its scaler from an fp16 file's
  /// state. A dynamic scaler takes S, both counters (clean steps clamped below this run's
  /// --loss_scale_window, so that the next clean step can still grow S); a static one keeps its
  /// --loss_scale S and takes the counters. Returns a log line ("" none): what was restored, or
  /// that a file of another precision leaves the scaler at its flags (or carries a scale this
  /// run does not use). Throws std::invalid_argument as parse_precision_state.
  std::string set_checkpoint_state(const std::map<std::string, std::string>& metadata);

 private:
  bool overflow_injected(int64_t step) const;

  const GPT& model_;
  MixedPrecisionConfig cfg_;
  std::unique_ptr<LossScaler> scaler_;          // fp16 only
  std::unique_ptr<OverflowAgreement> agree_;    // fp16 with a group
  cpu::RoundStats stats_;
  int64_t inject_step_ = -1;
  int64_t local_inject_step_ = -1;  // LLMP_TEST_LOCAL_OVERFLOW_STEP (on the listed ranks)
  mutable float walk_scale_ = 0;  // what walk_loss_scale last returned (0: never called)
  bool inject_here_ = false;
  bool count_on_device_ = false;
};

/// A Strategy that trains in the run's --precision: it owns the MixedPrecision and forwards to it
/// what the shared trainer asks about precision: the progress line's loss scale and skipped
/// steps, and a checkpoint's precision and loss-scaler state. The data-parallel stages and the
/// single-rank trainer derive from it instead of Strategy.
class MixedPrecisionStrategy : public Strategy {
 public:
  /// The loss scale (fp16) and the gradient norm (--clip_grad), as the progress line shows them.
  std::string step_note() const override { return mp_.step_note() + clip_.step_note(); }
  std::map<std::string, std::string> extra_state() const override {
    return mp_.checkpoint_state();
  }
  std::string set_extra_state(const std::map<std::string, std::string>& md) override {
    return mp_.set_checkpoint_state(md);
  }
  MixedPrecision& mixed_precision() { return mp_; }
  const MixedPrecision& mixed_precision() const { return mp_; }

 protected:
  /// Collective over `dp` (nullptr: one rank), as MixedPrecision's constructor. `clip`: the
  /// stage's gradient clipping, off by default (the stage says which group splits its gradient:
  /// GradClip(opt.clip_grad, nullptr) for a replica, (opt.clip_grad, &dp) for ZeRO's shards).
  MixedPrecisionStrategy(const GPT& model, MixedPrecisionConfig mp, ProcessGroup* dp,
                         GradClip clip = GradClip(0, nullptr))
      : mp_(model, mp, dp), clip_(std::move(clip)) {}

  MixedPrecision mp_;
  GradClip clip_;  ///< handed to mp_.optimizer_step by the stage
};

}  // namespace llmp
