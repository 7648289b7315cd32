// The single-rank delayed-update trainer (see delayed_update_reference.h).
#include "stages/pipedream_2bw/delayed_update_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace testing {

DelayedUpdateReference::DelayedUpdateReference(const GPT& model, AdamWConfig opt, uint64_t seed,
                                               TrainPrecision precision)
    : model_(model),
      older_(model.layout().num_params()),
      newest_(model.layout().num_params()),
      grads_(model.layout().num_params()),
      bf16_(precision == TrainPrecision::kBF16),
      opt_(model.layout().num_params(), opt, decay_ranges(model.layout(), opt.decay)),
      clip_(opt.clip_grad) {
  if (precision == TrainPrecision::kFP16)
    throw std::invalid_argument("DelayedUpdateReference: fp32 or bf16, not fp16");
  model.init_params(newest_.data(), seed);  // W(0)
  if (bf16_) {  // the master copy in fp32, the version its bf16 rounding
    master_ = newest_;
    cpu::round_values(newest_.data(), static_cast<int64_t>(newest_.size()), DType::kBF16);
  }
  older_ = newest_;  // W(-1) = W(0)
}

double DelayedUpdateReference::train_step(const int32_t* tokens, const int32_t* targets, int B,
                                          int T, int64_t step) {
  // g(t) = ∇ f_t(W(t-1)): one walk over the whole batch, loss scale 1/(B·T) (the mean loss).
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  const double loss = forward_backward(model_, older_.data(), grads_.data(), tokens, targets, B,
                                       T, 1.0f / (static_cast<float>(B) * T));
  // --clip_grad c (opt.clip_grad > 0): g(t) ← g(t)·min(1, c/(‖g(t)‖ + 1e-6)), the whole model's
  // norm (Pascanu et al. 2013; torch's clip_grad_norm_), applied as AdamW's gradient scale.
  float scale = 1.0f;
  if (clip_ > 0) {
    double sq = 0;
    for (float g : grads_) sq += static_cast<double>(g) * g;
    last_norm_ = std::sqrt(sq);
    scale = static_cast<float>(std::min(1.0, clip_ / (last_norm_ + 1e-6)));
  }
  // W(t+1) = AdamW(W(t), g(t)); W(t) becomes the older version. bf16: on the master copy, the
  // new version its rounding.
  older_ = newest_;
  if (bf16_) {
    opt_.step(master_.data(), grads_.data(), step, -1, scale);
    newest_ = master_;
    cpu::round_values(newest_.data(), static_cast<int64_t>(newest_.size()), DType::kBF16);
  } else {
    opt_.step(newest_.data(), grads_.data(), step, -1, scale);
  }
  return loss;
}

}  // namespace testing
}  // namespace llmp
