// Mixed precision for the data-parallel stages (mixed_precision.h).
#include "common/train/mixed_precision.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace llmp {

MixedPrecisionConfig mixed_precision_config(const TrainConfig& cfg) {
  MixedPrecisionConfig m;
  m.precision = parse_precision(cfg.precision);
  m.scaler.dynamic = cfg.loss_scale == 0;
  m.scaler.scale = static_cast<float>(m.scaler.dynamic ? cfg.initial_loss_scale : cfg.loss_scale);
  m.scaler.growth_interval = cfg.loss_scale_window;
  m.scaler.min_scale = static_cast<float>(cfg.min_loss_scale);
  if (!m.scaler.dynamic && m.scaler.min_scale > m.scaler.scale) m.scaler.min_scale = m.scaler.scale;
  return m;
}

namespace {
/// Whether `rank` is listed in the comma-separated `list` ("" or unset: every rank).
bool listed(const char* list, int rank) {
  if (!list || !*list) return true;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty() && std::atoi(item.c_str()) == rank) return true;
  return false;
}
}  // namespace

MixedPrecision::MixedPrecision(const GPT& model, MixedPrecisionConfig cfg, ProcessGroup* dp)
    : model_(model), cfg_(cfg) {
  if (model.activation_dtype() != dtype())
    throw std::invalid_argument(std::string("MixedPrecision: precision ") +
                                to_string(cfg.precision) + " with a model storing activations in " +
                                to_string(model.activation_dtype()));
  if (cfg_.precision == TrainPrecision::kFP16) {
    scaler_ = std::make_unique<LossScaler>(cfg_.scaler);
    if (dp) agree_ = std::make_unique<OverflowAgreement>(*dp);
  }
  if (const char* s = std::getenv("LLMP_TEST_OVERFLOW_STEP")) {
    inject_step_ = std::atoll(s);
    inject_here_ = listed(std::getenv("LLMP_TEST_OVERFLOW_RANKS"), dp ? dp->rank() : 0);
  }
}

Tensor MixedPrecision::new_buffer(int64_t n, MemCategory category) const {
  return Tensor::zeros({n}, dtype(), category);
}

void MixedPrecision::init(uint64_t seed, const Tensor& params, AdamW& opt,
                          int64_t master_begin) const {
  const int64_t psi = model_.layout().num_params();
  if (!mixed()) {
    model_.init_params(params.f32(), seed);
    return;
  }
  // The fp32 initialisation exists once, briefly (kOther), then lives on as the master copy.
  Tensor full = Tensor::empty({psi}, DType::kF32, MemCategory::kOther);
  model_.init_params(full.f32(), seed);
  cpu::round_to(full.f32(), params.raw(), params.dtype(), psi);
  const int64_t count = std::max<int64_t>(0, std::min(opt.size(), psi - master_begin));
  if (count > 0) opt.master().narrow(0, count).copy_from(full.narrow(master_begin, count));
}

bool MixedPrecision::overflow_injected(int64_t step) const {
  return scaler_ && inject_here_ && step == inject_step_;
}

float MixedPrecision::walk_loss_scale(float mean_scale, int64_t step) const {
  float s = mean_scale * loss_scale();
  if (overflow_injected(step)) s *= std::ldexp(1.0f, 64);
  walk_scale_ = s;  // optimizer_step may change S before the caller unscales this walk's loss
  return s;
}

double MixedPrecision::unscale_loss(double walk_loss, float mean_scale, int64_t step) const {
  // Not walk_loss_scale() again: after a skipped step S is already halved (the loss would double).
  return walk_loss * mean_scale / (walk_scale_ > 0 ? walk_scale_ : walk_loss_scale(mean_scale, step));
}

bool MixedPrecision::optimizer_step(AdamW& opt, const Tensor& params, const Tensor& grads,
                                    int64_t t, int64_t n) {
  if (!mixed()) {
    opt.step(params.f32(), grads.f32(), t, n);
    return true;
  }
  const float inv_scale = 1.0f / loss_scale();  // the S this step's walk used
  if (scaler_) {
    bool found_inf = has_nonfinite(n < 0 ? grads : grads.narrow(0, n));
    if (agree_) found_inf = agree_->any(found_inf);  // every rank skips the same step
    if (!scaler_->update(found_inf)) return false;
  }
  opt.step_mixed(params, grads, inv_scale, t, n);
  return true;
}

double MixedPrecision::underflow_fraction() const {
  return stats_.nonzero > 0 ? static_cast<double>(stats_.underflow) / stats_.nonzero : 0.0;
}

std::string MixedPrecision::step_note() const {
  if (!scaler_) return "";
  return fmt::format(" | loss scale {:g} | skipped {}", scaler_->scale(), scaler_->skipped_steps());
}

}  // namespace llmp
