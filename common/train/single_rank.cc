// The single-rank trainer (single_rank.h): forward and backward over the whole global batch, one
// AdamW step. Three lines, through MixedPrecision for --precision bf16 / fp16.
#include "common/train/single_rank.h"

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/runtime/log.h"
#include "common/train/dp_util.h"
#include "common/train/moe_report.h"

namespace llmp {

SingleRankStrategy::SingleRankStrategy(const GPT& model, AdamWConfig opt, uint64_t seed,
                                       MixedPrecisionConfig mp)
    : MixedPrecisionStrategy(model, mp, /*dp=*/nullptr, GradClip(opt.clip_grad, nullptr)),
      model_(model),
      params_(mp_.new_buffer(model.layout().num_params(), MemCategory::kParameters)),
      grads_(mp_.new_buffer(model.layout().num_params(), MemCategory::kGradients)),
      opt_(model.layout().num_params(), opt, decay_ranges(model.layout(), opt.decay), mp_.dtype(),
           model.device()) {
  mp_.init(seed, params_, opt_);
}

double SingleRankStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                      int global_batch, int T, int64_t step) {
  grads_.fill(0.0f);
  mp_.begin_step();
  if (MoeContext* moe = model_.moe()) moe->stats().reset(model_.config().experts);
  // loss_scale 1/(B·T): the gradient of the mean loss over the whole batch (times fp16's S).
  const float mean = 1.0f / (global_batch * T);
  FlatParams params(model_.layout(), params_);
  FlatGrads grads(model_.layout(), grads_, {}, mp_.round_stats());
  const double loss = UnitRunner(model_, params, &grads)
                          .forward_backward(tokens, targets, global_batch, T,
                                            mp_.walk_loss_scale(mean, step));
  const double mean_loss = mp_.unscale_loss(loss, mean, step);  // with the S this walk used
  mp_.optimizer_step(opt_, params_, grads_, step, -1, &clip_);  // fp16: skipped on an overflow
  if (MoeContext* moe = model_.moe()) last_routing_ = moe->stats(), last_T_ = T;
  return mean_loss;
}

void SingleRankStrategy::finish() {
  if (model_.moe()) log_info("{}", routing_summary(last_routing_, model_.config(), last_T_));
}

double SingleRankStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                     int global_batch, int T) {
  FlatParams params(model_.layout(), params_);
  return UnitRunner(model_, params).forward_loss(tokens, targets, global_batch, T);
}

void SingleRankStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  copy_replicated_state_out(params_, opt_, params, exp_avg, exp_avg_sq);
}

void SingleRankStrategy::set_state(const float* params, const float* exp_avg,
                                   const float* exp_avg_sq) {
  copy_replicated_state_in(params_, opt_, params, exp_avg, exp_avg_sq);
}

std::vector<ReportRow> SingleRankStrategy::report() const {
  const double psi = static_cast<double>(params_.numel());
  auto rows = mp_.mixed()
                  ? memory_rows(plan_memory(DPStage::kBaseline, psi, 1, mp_.plan()), "2Ψ", "2Ψ",
                                "12Ψ")
                  : memory_rows(plan_memory(DPStage::kBaseline, psi, 1, mp_.plan()), "4Ψ", "4Ψ",
                                "8Ψ");
  rows.push_back({"sent per step", 0.0, 0.0, "0"});
  return rows;
}

}  // namespace llmp
