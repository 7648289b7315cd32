// The single-rank trainer: the baseline stage (stages/baseline), the reference every other stage
// must reproduce, and the mixed_precision stage's runs. It lives in common/ because two stages
// train with it and stages never depend on each other.
//
// One rank holds everything: parameters (Ψ), gradients (Ψ) and AdamW's m and v (2Ψ), all fp32,
// 16Ψ bytes (K = 8). A step is forward, backward, optimizer, nothing else: no communication.
// With --precision bf16 / fp16 (common/train/mixed_precision.h): 16-bit parameters and
// gradients (2Ψ + 2Ψ) and an fp32 master copy with m and v (12Ψ): 16Ψ bytes again, K = 12.
//
// Glossary: B global batch, T sequence length, Ψ parameter count.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

class SingleRankStrategy : public MixedPrecisionStrategy {
 public:
  /// Initialises the parameters from `seed` (GPT::init_params). `mp`: the precision (the
  /// model's activation dtype must match it).
  SingleRankStrategy(const GPT& model, AdamWConfig opt, uint64_t seed,
                     MixedPrecisionConfig mp = {});

  BatchSlice batch_slice(int global_batch) const override { return {0, global_batch}; }
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  std::vector<ReportRow> report() const override;
  /// A mixture of experts: prints the last step's routing (moe_report.h). Else nothing.
  void finish() override;
  /// The last training step's routing statistics (empty for a dense model).
  const MoeStats& last_routing() const { return last_routing_; }

  /// The fp32 parameters (throws std::runtime_error under mixed precision: see params_tensor()).
  const float* params() const { return params_.f32(); }
  /// The working copy of the parameters: Ψ elements, f32 or 16-bit.
  const Tensor& params_tensor() const { return params_; }
  /// The last step's gradients: Ψ elements, f32 or 16-bit (times S under fp16).
  const Tensor& grads_tensor() const { return grads_; }

 private:
  const GPT& model_;
  Tensor params_, grads_;  // Ψ each, in mp_.dtype()
  AdamW opt_;              // m, v (and the fp32 master weights when 16-bit): Ψ each
  MoeStats last_routing_;
  int last_T_ = 0;
};

}  // namespace llmp
