// The mixed_precision stage's one-rank trainer (precision_strategy.h).
#include "stages/mixed_precision/precision_strategy.h"

#include <chrono>
#include <fstream>
#include <stdexcept>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/runtime/log.h"
#include "common/train/dp_util.h"

namespace llmp {

void to_json(nlohmann::json& j, const PrecisionSummary& s) {
  j = {{"precision", s.precision},         {"loss_scale_flag", s.loss_scale_flag},
       {"steps", s.steps},                 {"psi", s.psi},
       {"train_loss", s.train_loss},
       {"val_loss", s.val_loss},           {"param_bytes", s.param_bytes},
       {"grad_bytes", s.grad_bytes},       {"optimizer_bytes", s.optimizer_bytes},
       {"skipped_steps", s.skipped_steps}, {"final_loss_scale", s.final_loss_scale},
       {"underflow_fraction", s.underflow_fraction}, {"tokens_per_s", s.tokens_per_s}};
}

void from_json(const nlohmann::json& j, PrecisionSummary& s) {
  j.at("precision").get_to(s.precision);
  j.at("loss_scale_flag").get_to(s.loss_scale_flag);
  j.at("steps").get_to(s.steps);
  j.at("psi").get_to(s.psi);
  j.at("train_loss").get_to(s.train_loss);
  j.at("val_loss").get_to(s.val_loss);
  j.at("param_bytes").get_to(s.param_bytes);
  j.at("grad_bytes").get_to(s.grad_bytes);
  j.at("optimizer_bytes").get_to(s.optimizer_bytes);
  j.at("skipped_steps").get_to(s.skipped_steps);
  j.at("final_loss_scale").get_to(s.final_loss_scale);
  j.at("underflow_fraction").get_to(s.underflow_fraction);
  j.at("tokens_per_s").get_to(s.tokens_per_s);
}

PrecisionStrategy::PrecisionStrategy(const GPT& model, AdamWConfig opt, uint64_t seed,
                                     MixedPrecisionConfig mp, std::string summary_json,
                                     double loss_scale_flag)
    : model_(model),
      mp_(model, mp, /*dp=*/nullptr),
      params_(mp_.new_buffer(model.layout().num_params(), MemCategory::kParameters)),
      grads_(mp_.new_buffer(model.layout().num_params(), MemCategory::kGradients)),
      opt_(model.layout().num_params(), opt, decay_ranges(model.layout(), opt.decay),
           mp_.dtype()),
      summary_json_(std::move(summary_json)),
      loss_scale_flag_(loss_scale_flag) {
  mp_.init(seed, params_, opt_);
}

double PrecisionStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                     int global_batch, int T, int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  grads_.fill(0.0f);
  mp_.begin_step();
  // loss_scale 1/(B·T): the gradient of the mean loss (times S under fp16: the walk's
  // gradients hold S·g, small ones lifted out of fp16's underflow range).
  const float mean = 1.0f / (global_batch * T);
  FlatParams params(model_.layout(), params_);
  // FlatGrads rounds each unit's fp32 gradient into the 16-bit buffer, counting what rounding
  // flushed to zero into mp_.round_stats().
  FlatGrads grads(model_.layout(), grads_, {}, mp_.round_stats());
  const double loss = UnitRunner(model_, params, &grads)
                          .forward_backward(tokens, targets, global_batch, T,
                                            mp_.walk_loss_scale(mean, step));
  // Unscaled with the S this step's walk used: before optimizer_step, which may halve or double
  // it (after it, a growth step would report half the loss, a backoff step twice it).
  last_loss_ = mp_.unscale_loss(loss, mean, step);
  mp_.optimizer_step(opt_, params_, grads_, step);  // fp16: skipped on an overflow
  underflow_sum_ += mp_.underflow_fraction();
  if (++steps_ > 1) {  // the first step pays for first-touch page faults: not timed
    timed_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    timed_tokens_ += static_cast<double>(global_batch) * T;
  }
  eval_since_step_ = false;
  return last_loss_;
}

double PrecisionStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                    int global_batch, int T) {
  FlatParams params(model_.layout(), params_);
  const double loss = UnitRunner(model_, params).forward_loss(tokens, targets, global_batch, T);
  if (!eval_since_step_) val_sum_ = 0, val_count_ = 0;  // a new validation
  eval_since_step_ = true;
  val_sum_ += loss;
  ++val_count_;
  return loss;
}

void PrecisionStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  copy_replicated_state_out(params_, opt_, params, exp_avg, exp_avg_sq);
}

void PrecisionStrategy::set_state(const float* params, const float* exp_avg,
                                  const float* exp_avg_sq) {
  copy_replicated_state_in(params_, opt_, params, exp_avg, exp_avg_sq);
}

std::vector<ReportRow> PrecisionStrategy::report() const {
  const double psi = static_cast<double>(params_.numel());
  const MemoryPlan plan = plan_memory(DPStage::kBaseline, psi, 1, mp_.plan());
  auto rows = mp_.mixed() ? memory_rows(plan, "2Ψ", "2Ψ", "12Ψ")
                          : memory_rows(plan, "4Ψ", "4Ψ", "8Ψ");
  rows.push_back({"sent per step", 0.0, 0.0, "0"});
  return rows;
}

PrecisionSummary PrecisionStrategy::summary() const {
  PrecisionSummary s;
  s.precision = to_string(mp_.precision());
  s.loss_scale_flag = loss_scale_flag_;
  s.steps = steps_;
  s.psi = params_.numel();
  s.train_loss = last_loss_;
  s.val_loss = val_count_ ? val_sum_ / val_count_ : -1;
  for (const ReportRow& r : report()) {  // the allocator's counts (MemoryTracker)
    if (r.what == "parameters") s.param_bytes = r.measured;
    if (r.what == "gradients") s.grad_bytes = r.measured;
    if (r.what == "optimizer state") s.optimizer_bytes = r.measured;
  }
  s.skipped_steps = mp_.skipped_steps();
  s.final_loss_scale = mp_.loss_scale();
  s.underflow_fraction = steps_ ? underflow_sum_ / steps_ : 0;
  s.tokens_per_s = timed_s_ > 0 ? timed_tokens_ / timed_s_ : 0;
  return s;
}

void PrecisionStrategy::finish() {
  const PrecisionSummary s = summary();
  if (mp_.mixed())
    log_info("gradient elements nonzero in fp32 that rounding to {} flushed to zero: {:.4g}% "
             "(mean over {} steps)",
             s.precision, 100 * s.underflow_fraction, s.steps);
  if (summary_json_.empty()) return;
  std::ofstream out(summary_json_);
  out << nlohmann::json(s).dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write --summary_json " + summary_json_);
}

}  // namespace llmp
