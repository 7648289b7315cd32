#include "common/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/ops/kernel_ops.h"

namespace llmp {

const char* decay_rule_name(DecayRule r) { return r == DecayRule::kAll ? "all" : "dim>=2"; }

AdamW::AdamW(int64_t n, AdamWConfig cfg, std::vector<ElementRange> decay, DType param_dtype,
             Device device)
    : n_(n),
      cfg_(cfg),
      decay_(std::move(decay)),
      m_(Tensor::zeros({n}, DType::kF32, MemCategory::kOptimizerState, device)),
      v_(Tensor::zeros({n}, DType::kF32, MemCategory::kOptimizerState, device)),
      device_(device) {
  int64_t prev = 0;
  for (const ElementRange& r : decay_)
    if (r.begin < prev || r.end < r.begin || r.end > n)
      throw std::invalid_argument("AdamW decay range [" + std::to_string(r.begin) + ", " +
                                  std::to_string(r.end) + ") is unsorted, overlaps or leaves [0, " +
                                  std::to_string(n) + ")");
    else
      prev = r.end;
  if (param_dtype == DType::kF16 || param_dtype == DType::kBF16) {
    master_ = Tensor::zeros({n}, DType::kF32, MemCategory::kOptimizerState, device);
    master_dtype_ = param_dtype;
  } else if (param_dtype != DType::kF32) {
    throw std::invalid_argument(std::string("AdamW: parameters in ") + to_string(param_dtype) +
                                " (expected f32, f16 or bf16)");
  }
}

void AdamW::step(float* params, const float* grads, int64_t t, int64_t n, float grad_scale) {
  if (n < 0 || n > n_) n = n_;
  update(params, grads, 0, n, t, grad_scale);
}

void AdamW::step_mixed(const Tensor& params16, const Tensor& grads16, float grad_scale, int64_t t,
                       int64_t n) {
  if (!master_.defined()) throw std::logic_error("AdamW::step_mixed without master weights");
  if (n < 0 || n > n_) n = n_;
  if (params16.dtype() != master_dtype_ || params16.numel() < n || grads16.numel() < n ||
      params16.device() != device_ || grads16.device() != device_)
    throw std::invalid_argument("AdamW::step_mixed: parameters " + params16.describe() +
                                ", gradients " + grads16.describe() + " for " + std::to_string(n) +
                                " elements of state on " + to_string(device_));
  // One call for the span, in runs of constant λ: widen and unscale the gradients, update the
  // master copy, round it into the 16-bit parameters (KernelOps::adamw_update_mixed, on the
  // state's device: one kernel launch on a GPU).
  kernel_ops(device_).adamw_update_mixed(params16.raw(), params16.dtype(), grads16.raw(),
                                         grads16.dtype(), master_.f32(), m_.f32(), v_.f32(),
                                         decay_runs(0, n), step_constants(t, grad_scale));
}

template <typename Fn>
void AdamW::for_each_decay_run(int64_t i0, int64_t count, Fn&& fn) const {
  // Walk [i0, i0 + count) in runs of constant λ: inside a decay range λ, between them 0.
  const int64_t end = i0 + count;
  size_t k = 0;  // the first decay range that does not end at or before e
  for (int64_t e = i0; e < end;) {
    while (k < decay_.size() && decay_[k].end <= e) ++k;
    const bool inside = k < decay_.size() && decay_[k].begin <= e;
    const int64_t stop = std::min(end, inside ? decay_[k].end
                                              : (k < decay_.size() ? decay_[k].begin : end));
    fn(e, stop, inside ? cfg_.weight_decay : 0.0f);
    e = stop;
  }
}

cpu::AdamWStep AdamW::step_constants(int64_t t, float grad_scale) const {
  cpu::AdamWStep s;
  s.grad_scale = grad_scale;
  s.lr = cfg_.lr;
  s.beta1 = cfg_.beta1;
  s.beta2 = cfg_.beta2;
  s.eps = cfg_.eps;
  s.c1 = 1.0f / (1.0f - static_cast<float>(std::pow(s.beta1, t)));  // bias corrections
  s.c2 = 1.0f / (1.0f - static_cast<float>(std::pow(s.beta2, t)));
  return s;
}

std::vector<cpu::DecayRun> AdamW::decay_runs(int64_t i0, int64_t count) const {
  std::vector<cpu::DecayRun> runs;
  for_each_decay_run(i0, count, [&](int64_t, int64_t stop, float wd) {
    runs.push_back({stop - i0, wd});
  });
  return runs;
}

void AdamW::update(float* params, const float* grads, int64_t i0, int64_t count, int64_t t,
                   float grad_scale) {
  // One call for the span [i0, i0 + count) of the state, in runs of constant λ.
  kernel_ops(device_).adamw_update(params, grads, m_.f32() + i0, v_.f32() + i0,
                                   decay_runs(i0, count), step_constants(t, grad_scale));
}

}  // namespace llmp
