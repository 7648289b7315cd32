// The mixed_precision stage's one-rank trainer (precision_strategy.h).
#include "stages/mixed_precision/precision_strategy.h"

#include <chrono>
#include <fstream>
#include <stdexcept>

#include "common/runtime/log.h"

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
    : SingleRankStrategy(model, opt, seed, mp),
      summary_json_(std::move(summary_json)),
      loss_scale_flag_(loss_scale_flag) {
  // The table's underflow column on a device too: counted there by the device's kernels
  // (KernelOps::count_rounding), the same counts as on the CPU.
  mixed_precision().count_on_device(true);
}

double PrecisionStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                     int global_batch, int T, int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  last_loss_ = SingleRankStrategy::train_step(tokens, targets, global_batch, T, step);
  // What rounding this step's fp32 gradients into 16 bits flushed to zero (FlatGrads counts it
  // into the MixedPrecision's RoundStats).
  underflow_sum_ += mixed_precision().underflow_fraction();
  if (++steps_ > 1) {  // the first step pays for first-touch page faults: not timed
    timed_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    timed_tokens_ += static_cast<double>(global_batch) * T;
  }
  eval_since_step_ = false;
  return last_loss_;
}

double PrecisionStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                    int global_batch, int T) {
  const double loss = SingleRankStrategy::eval_loss(tokens, targets, global_batch, T);
  if (!eval_since_step_) val_sum_ = 0, val_count_ = 0;  // a new validation
  eval_since_step_ = true;
  val_sum_ += loss;
  ++val_count_;
  return loss;
}

PrecisionSummary PrecisionStrategy::summary() const {
  PrecisionSummary s;
  const MixedPrecision& mp = mixed_precision();
  s.precision = to_string(mp.precision());
  s.loss_scale_flag = loss_scale_flag_;
  s.steps = steps_;
  s.psi = params_tensor().numel();
  s.train_loss = last_loss_;
  s.val_loss = val_count_ ? val_sum_ / val_count_ : -1;
  for (const ReportRow& r : report()) {  // the allocator's counts (MemoryTracker)
    if (r.what == "parameters") s.param_bytes = r.measured;
    if (r.what == "gradients") s.grad_bytes = r.measured;
    if (r.what == "optimizer state") s.optimizer_bytes = r.measured;
  }
  s.skipped_steps = mp.skipped_steps();
  s.final_loss_scale = mp.loss_scale();
  s.underflow_fraction = steps_ ? underflow_sum_ / steps_ : 0;
  s.tokens_per_s = timed_s_ > 0 ? timed_tokens_ / timed_s_ : 0;
  return s;
}

void PrecisionStrategy::finish() {
  const PrecisionSummary s = summary();
  if (mixed_precision().mixed())
    log_info("gradient elements nonzero in fp32 that rounding to {} flushed to zero: {:.4g}% "
             "(mean over {} steps)",
             s.precision, 100 * s.underflow_fraction, s.steps);
  if (summary_json_.empty()) return;
  std::ofstream out(summary_json_);
  out << nlohmann::json(s).dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write --summary_json " + summary_json_);
}

}  // namespace llmp
