// Mixed precision for the data-parallel stages (mixed_precision.h).
#include "common/train/mixed_precision.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "common/train/dp_util.h"

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
  const bool listed_here = listed(std::getenv("LLMP_TEST_OVERFLOW_RANKS"), dp ? dp->rank() : 0);
  if (const char* s = std::getenv("LLMP_TEST_OVERFLOW_STEP")) {
    inject_step_ = std::atoll(s);
    inject_here_ = listed_here;
  }
  if (const char* s = std::getenv("LLMP_TEST_LOCAL_OVERFLOW_STEP"))
    if (listed_here) local_inject_step_ = std::atoll(s);
}

Tensor MixedPrecision::new_buffer(int64_t n, MemCategory category) const {
  return Tensor::zeros({n}, dtype(), category, model_.device());  // where the walk runs
}

void MixedPrecision::init(uint64_t seed, const Tensor& params, AdamW& opt,
                          int64_t master_begin) const {
  const int64_t psi = model_.layout().num_params();
  if (!mixed() && params.device() == Device::kCPU) {
    model_.init_params(params.f32(), seed);
    return;
  }
  if (!mixed()) {  // on a device: initialise on the host, then one copy up
    Tensor host = Tensor::empty({psi}, DType::kF32, MemCategory::kOther);
    model_.init_params(host.f32(), seed);
    Tensor(params).copy_from(host);  // a handle to the same storage
    return;
  }
  // The fp32 initialisation exists once, briefly (kOther), then lives on as the master copy.
  Tensor full = Tensor::empty({psi}, DType::kF32, MemCategory::kOther);
  model_.init_params(full.f32(), seed);
  round_from_host(params, full.f32());
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
  const float used = walk_scale_ > 0 ? walk_scale_ : walk_loss_scale(mean_scale, step);
  return walk_loss * mean_scale / used;
}

bool MixedPrecision::optimizer_step(AdamW& opt, const Tensor& params, const Tensor& grads,
                                    int64_t t, int64_t n, GradClip* clip,
                                    const std::vector<Tensor>* owned_parts) {
  // This rank's part of the gradient: the first n elements, or the parts the caller names.
  const std::vector<Tensor> owned =
      owned_parts ? *owned_parts : std::vector<Tensor>{n < 0 ? grads : grads.narrow(0, n)};
  if (!mixed()) {
    const float k = clip ? clip->coefficient(owned) : 1.0f;  // --clip_grad: min(1, c/‖g‖)
    opt.step(params.f32(), grads.f32(), t, n, k);
    return true;
  }
  const float inv_scale = 1.0f / loss_scale();  // the S this step's walk used
  if (scaler_) {
    bool found_inf = t == local_inject_step_;  // the local test hook (header)
    for (const Tensor& part : owned) found_inf = found_inf || has_nonfinite(part);
    if (agree_) found_inf = agree_->any(found_inf);  // every rank skips the same step
    if (!scaler_->update(found_inf)) {
      if (clip) clip->skip();  // no norm this step
      return false;
    }
  }
  // ‖g‖ of the unscaled gradients (‖S·g‖/S), then one factor for AdamW: 1/S times min(1, c/‖g‖).
  const float k = clip ? clip->coefficient(owned, inv_scale) : 1.0f;
  // AdamW's bias corrections count the updates applied, not the steps run: a skipped step never
  // reached the optimizer (torch's GradScaler, Megatron and DeepSpeed skip optimizer.step()
  // itself). Counting it would shrink every later update: the first real one at t = 5 after four
  // skips would move by m̂/√v̂ ≈ 0.5 instead of 1.
  opt.step_mixed(params, grads, inv_scale * k, t - skipped_steps(), n);
  return true;
}

double MixedPrecision::underflow_fraction() const {
  return stats_.nonzero > 0 ? static_cast<double>(stats_.underflow) / stats_.nonzero : 0.0;
}

namespace {

const char* kPrecisionKey = "precision";
const char* kScaleKey = "loss_scale";
const char* kCleanKey = "loss_scale_clean_steps";
const char* kSkippedKey = "loss_scale_skipped_steps";

[[noreturn]] void bad_state(const std::string& key, const std::string& value,
                            const std::string& what) {
  throw std::invalid_argument(key + " '" + value + "' " + what);
}

int64_t parse_count(const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (v >= 0 && used == value.size()) return v;
  } catch (const std::exception&) {
  }
  bad_state(key, value, "is not a non-negative integer");
}

float parse_scale(const std::string& value) {
  try {
    size_t used = 0;
    const float v = std::stof(value, &used);
    if (std::isfinite(v) && v > 0 && used == value.size()) return v;
  } catch (const std::exception&) {
  }
  bad_state(kScaleKey, value, "is not a finite number > 0");
}

// "a bf16", "an fp16", "an fp32" (a log line's words).
std::string with_article(TrainPrecision p) {
  return std::string(p == TrainPrecision::kBF16 ? "a " : "an ") + to_string(p);
}

}  // namespace

PrecisionCheckpointState parse_precision_state(const std::map<std::string, std::string>& md) {
  PrecisionCheckpointState st;
  if (auto it = md.find(kPrecisionKey); it != md.end()) {
    try {
      st.precision = parse_precision(it->second);
    } catch (const std::exception&) {
      bad_state(kPrecisionKey, it->second, "is not fp32, bf16 or fp16");
    }
  }
  int found = 0;
  for (const char* key : {kScaleKey, kCleanKey, kSkippedKey}) found += md.count(key);
  const bool fp16 = st.precision == TrainPrecision::kFP16;
  if (!fp16 && found > 0)
    bad_state(kPrecisionKey, to_string(st.precision), "comes with loss-scaler state (fp16 only)");
  if (fp16 && found < 3)
    bad_state(kPrecisionKey, "fp16", "needs loss_scale, loss_scale_clean_steps and "
                                     "loss_scale_skipped_steps in the metadata");
  if (fp16) {
    st.has_scaler = true;
    st.loss_scale = parse_scale(md.at(kScaleKey));
    st.clean_steps = parse_count(kCleanKey, md.at(kCleanKey));
    st.skipped_steps = parse_count(kSkippedKey, md.at(kSkippedKey));
  }
  return st;
}

std::map<std::string, std::string> MixedPrecision::checkpoint_state() const {
  std::map<std::string, std::string> md{{kPrecisionKey, to_string(cfg_.precision)}};
  if (scaler_) {
    md[kScaleKey] = fmt::format("{}", scaler_->scale());  // shortest round-trip form
    md[kCleanKey] = std::to_string(scaler_->clean_steps_in_a_row());
    md[kSkippedKey] = std::to_string(scaler_->skipped_steps());
  }
  return md;
}

namespace {
/// A loss scale as the user reads it: 16777216, not 1.67772e+07 (scales are powers of two).
std::string scale_str(float s) {
  return s >= 1 && s < 1e15f && s == std::floor(s) ? fmt::format("{:.0f}", s)
                                                   : fmt::format("{:g}", s);
}
}  // namespace

std::string MixedPrecision::set_checkpoint_state(const std::map<std::string, std::string>& md) {
  const PrecisionCheckpointState st = parse_precision_state(md);
  if (!scaler_)
    return st.has_scaler ? fmt::format("the checkpoint's fp16 loss scale {} is not used by {} "
                                       "run", scale_str(st.loss_scale),
                                       with_article(cfg_.precision))
                         : "";
  if (!st.has_scaler)
    return fmt::format("{} checkpoint holds no loss-scaler state: the scale starts at {}",
                       with_article(st.precision), scale_str(scaler_->scale()));
  const LossScalerConfig& c = scaler_->config();
  const float scale = c.dynamic ? st.loss_scale : scaler_->scale();  // a static S is a flag
  const int64_t clean = c.dynamic ? std::min<int64_t>(st.clean_steps, c.growth_interval - 1)
                                  : st.clean_steps;
  scaler_->set_state(scale, clean, st.skipped_steps);
  return fmt::format("loss scaler restored: scale {}{}, clean steps in a row {}, skipped {}",
                     scale_str(scale), c.dynamic || scale == st.loss_scale
                                ? std::string()
                                : fmt::format(" (--loss_scale; the checkpoint's was {})",
                                              scale_str(st.loss_scale)),
                     clean, st.skipped_steps);
}

std::string MixedPrecision::step_note() const {
  if (!scaler_) return "";
  return fmt::format(" | loss scale {} | skipped {}", scale_str(scaler_->scale()),
                     scaler_->skipped_steps());
}

}  // namespace llmp
