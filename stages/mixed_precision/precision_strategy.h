// The mixed_precision stage's trainer: one rank, the baseline's step in the run's precision
// (common/train/mixed_precision.h does the work), plus what the side-by-side table needs to
// know about the run: the mean underflow fraction of the gradients, the loss scale, skipped
// steps, the last validation loss, the measured bytes and tokens/s.
//
// One rank holds everything: the step is the baseline's, common/train/single_rank.h (in common/
// because stages never depend on each other); this class only records what the table shows:
//   fp32:        parameters 4Ψ + gradients 4Ψ + AdamW m, v 8Ψ                     = 16Ψ (K = 8)
//   bf16 / fp16: parameters 2Ψ + gradients 2Ψ + fp32 master, m, v 12Ψ            = 16Ψ (K = 12)
//
// Micikevicius et al. 2018, "Mixed Precision Training" (§3: master weights, loss scaling).
// Glossary: B global batch, T sequence length, Ψ parameter count, S loss scale.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/mixed_precision.h"
#include "common/train/single_rank.h"
#include "common/train/strategy.h"

namespace llmp {

/// What one run measured: a row of the side-by-side table (written as JSON by the run, read by
/// the driver, side_by_side.h).
struct PrecisionSummary {
  std::string precision;       ///< "fp32", "bf16", "fp16"
  double loss_scale_flag = 0;  ///< --loss_scale: 0 dynamic, S static (fp16 only)
  int64_t steps = 0;
  int64_t psi = 0;             ///< parameters Ψ of the model
  double train_loss = 0;       ///< the last step's mean loss (nats/token)
  double val_loss = -1;        ///< the last validation (mean of its batches); -1: none ran
  double param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;  ///< measured (MemoryTracker)
  int64_t skipped_steps = 0;
  double final_loss_scale = 1;
  /// Mean over the steps of: gradient elements nonzero in fp32 that rounding to 16 bits flushed
  /// to zero, over the nonzero ones (MixedPrecision::underflow_fraction). 0 for fp32.
  double underflow_fraction = 0;
  double tokens_per_s = 0;     ///< over the steps after the first (train_step's own wall time)
};

void to_json(nlohmann::json& j, const PrecisionSummary& s);
void from_json(const nlohmann::json& j, PrecisionSummary& s);

class PrecisionStrategy : public SingleRankStrategy {
 public:
  /// Initialises the parameters from `seed` (GPT::init_params). The model's activation dtype
  /// must be mp's storage dtype (std::invalid_argument otherwise). `summary_json`: where
  /// finish() writes the run's PrecisionSummary ("" = nowhere).
  PrecisionStrategy(const GPT& model, AdamWConfig opt, uint64_t seed, MixedPrecisionConfig mp,
                    std::string summary_json = "", double loss_scale_flag = 0);

  /// The single-rank step, timed, with its underflow fraction added up.
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  /// Also remembers the losses since the last train_step: their mean is the run's last
  /// validation loss (train_main averages --eval_batches calls).
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  /// Prints the run's underflow line and writes the summary JSON (throws std::runtime_error
  /// naming the path when it cannot be written).
  void finish() override;

  /// The run so far.
  PrecisionSummary summary() const;

 private:
  std::string summary_json_;
  double loss_scale_flag_;
  int64_t steps_ = 0;
  double last_loss_ = 0, underflow_sum_ = 0;
  double timed_s_ = 0, timed_tokens_ = 0;  // steps after the first
  double val_sum_ = 0;
  int val_count_ = 0;
  bool eval_since_step_ = false;
};

}  // namespace llmp
