// The single-rank reference for PipeDream-2BW: the paper's update rule on one rank, no pipeline.
//
// Narayanan et al. 2021, "Memory-Efficient Pipeline-Parallel DNN Training" (ICML), §3.1: with
// double-buffered weight updates the gradient of batch t is computed with the weights one
// version older than those it is applied to,
//
//   g(t)   = ∇ f_t(W(t-1))                 mean loss over the batch's B·T tokens; W(-1) = W(0)
//   W(t+1) = AdamW(W(t), g(t), step)        step = the train_step `step` of batch t
//
// (the paper's W(t+1) = W(t) - ν·∇f(W(t-1)), with AdamW's update in place of ν·∇f). This class
// applies exactly that to whole-model flat buffers, written from the rule and not from the
// stage (stages/pipedream_2bw/pipedream_2bw.cc): it keeps W(t-1) and W(t), walks the whole
// model once per batch at W(t-1) (the baseline's walk, loss scale 1/(B·T)), then steps AdamW on
// W(t). The tests run it next to the stage on the same batches: every step's loss and the final
// parameters must agree.
//
// Memory: two whole-model versions as plain std::vectors (not counted by the MemoryTracker, so
// a test can run it beside the stage and still measure the stage's kParameters).
//
// bf16 (mixed precision, Micikevicius et al. 2018): AdamW steps an fp32 master copy of W(t) and
// the new version is that master rounded to bf16 (kept as fp32 values that are bf16 numbers);
// the walk reads the 16-bit W(t-1) and its gradient stays fp32. The model must store bf16
// activations (GPT(cfg, TpComm::none(), DType::kBF16)).
//
// Glossary: t batch (0-based; its train_step `step` is t+1 in the tests), W(t) weight version t,
// g(t) gradient of batch t, B global batch, T sequence length, Ψ parameters.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/tensor/precision.h"

namespace llmp {
namespace testing {

class DelayedUpdateReference {
 public:
  /// W(0) = W(-1) = model.init_params(seed); AdamW over all Ψ with decay_ranges(layout,
  /// opt.decay), as the baseline builds it; opt.clip_grad c > 0: each g(t) is clipped to the
  /// global norm c first. `model` must outlive the reference.
  /// `precision`: fp32 or bf16 (above); std::invalid_argument for fp16.
  DelayedUpdateReference(const GPT& model, AdamWConfig opt, uint64_t seed,
                         TrainPrecision precision = TrainPrecision::kFP32);

  /// Batch t = the number of earlier calls: tokens/targets (B,T). Computes the mean loss and
  /// g(t) at W(t-1), then W(t+1) = AdamW(W(t), g(t), step). Returns that loss (nats per token).
  double train_step(const int32_t* tokens, const int32_t* targets, int B, int T, int64_t step);

  /// The newest version: W(t+1) after t+1 calls (W(0) before any). Ψ floats, model layout; in
  /// bf16 the rounded values.
  const std::vector<float>& newest() const { return newest_; }
  /// bf16: the fp32 master copy of newest() (what a checkpoint keeps); fp32: newest().
  const std::vector<float>& master() const { return bf16_ ? master_ : newest_; }
  /// The version before it: W(t) after t+1 calls (W(-1) = W(0) before any).
  const std::vector<float>& older() const { return older_; }
  /// ‖g(t)‖ of the last call under clipping (NaN without).
  double last_norm() const { return last_norm_; }

 private:
  const GPT& model_;
  std::vector<float> older_, newest_, grads_;  // W(t-1), W(t), g(t): Ψ each
  std::vector<float> master_;                  // bf16: W(t) in fp32, before rounding
  bool bf16_ = false;
  AdamW opt_;
  double clip_ = 0;                           // opt.clip_grad
  double last_norm_ = std::nan("");
};

}  // namespace testing
}  // namespace llmp
