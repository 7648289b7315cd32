#include "stages/baseline/baseline.h"

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/train/dp_util.h"

namespace llmp {

BaselineStrategy::BaselineStrategy(const GPT& model, AdamWConfig opt, uint64_t seed)
    : model_(model),
      params_(Tensor::empty({model.layout().num_params()}, DType::kF32, MemCategory::kParameters)),
      grads_(Tensor::zeros({model.layout().num_params()}, DType::kF32, MemCategory::kGradients)),
      opt_(model.layout().num_params(), opt, decay_ranges(model.layout(), opt.decay)) {
  model_.init_params(params_.f32(), seed);
}

double BaselineStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                    int global_batch, int T, int64_t step) {
  grads_.fill(0.0f);
  // loss_scale 1/(B·T): the gradient of the mean loss over the whole batch.
  const double loss = forward_backward(model_, params_.f32(), grads_.f32(), tokens, targets,
                                              global_batch, T, 1.0f / (global_batch * T));
  opt_.step(params_.f32(), grads_.f32(), step);
  return loss;
}

double BaselineStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                   int global_batch, int T) {
  return forward_loss(model_, params_.f32(), tokens, targets, global_batch, T);
}

void BaselineStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  copy_replicated_state_out(params_, opt_, params, exp_avg, exp_avg_sq);
}

void BaselineStrategy::set_state(const float* params, const float* exp_avg,
                                 const float* exp_avg_sq) {
  copy_replicated_state_in(params_, opt_, params, exp_avg, exp_avg_sq);
}

std::vector<ReportRow> BaselineStrategy::report() const {
  const double psi = static_cast<double>(params_.numel());
  auto rows = memory_rows(plan_memory(DPStage::kBaseline, psi, 1, Precision::fp32()), "4Ψ", "4Ψ",
                          "8Ψ");
  rows.push_back({"sent per step", 0.0, 0.0, "0"});
  return rows;
}

}  // namespace llmp
