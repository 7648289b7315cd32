// The single-rank reference trainer: every other stage must reproduce its losses and parameters.
//
// One rank holds everything: parameters (Ψ), gradients (Ψ) and AdamW's m and v (2Ψ), all fp32,
// 16Ψ bytes (K = 8). A step is forward, backward, optimizer, nothing else: no communication.
//
// Glossary: B global batch, T sequence length, Ψ parameter count.
#pragma once

#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/strategy.h"

namespace llmp {

class BaselineStrategy : public Strategy {
 public:
  /// Initialises the parameters from `seed` (GPT::init_params).
  BaselineStrategy(const GPT& model, AdamWConfig opt, uint64_t seed);

  BatchSlice batch_slice(int global_batch) const override { return {0, global_batch}; }
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  std::vector<ReportRow> report() const override;

  const float* params() const { return params_.f32(); }

 private:
  const GPT& model_;
  Tensor params_, grads_;  // Ψ each
  AdamW opt_;              // m, v: Ψ each
};

}  // namespace llmp
