// Global-norm clipping (see grad_clip.h): Σ g² of the owned parts on their device, one all_reduce
// of the partial sum, the coefficient.
#include "common/optim/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/ops/kernel_ops.h"

namespace llmp {

float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  const double k = max_norm / (norm + 1e-6);  // torch's clip_coef; NaN for a NaN norm
  return k < 1.0 ? static_cast<float>(k) : (std::isnan(k) ? NAN : 1.0f);
}

void OwnedRanges::add(int64_t offset, int64_t numel) {
  if (numel <= 0) return;
  if (!ranges_.empty() && ranges_.back().second == offset)
    ranges_.back().second += numel;  // continues the last range: one view, one read-back
  else
    ranges_.push_back({offset, offset + numel});
}

std::vector<Tensor> OwnedRanges::views(const Tensor& t, int64_t from) const {
  std::vector<Tensor> out;
  const int64_t to = from + t.numel();
  for (auto [begin, end] : ranges_) {
    const int64_t a = std::max(begin, from), b = std::min(end, to);
    if (a < b) out.push_back(t.narrow(a - from, b - a));
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> OwnedRanges::ranges() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (auto [begin, end] : ranges_) out.push_back({begin, end - begin});
  return out;
}

GradClip::GradClip(double max_norm, ProcessGroup* split_over)
    : max_norm_(max_norm), last_norm_(std::numeric_limits<double>::quiet_NaN()) {
  if (!(max_norm >= 0) || !std::isfinite(max_norm))
    throw std::invalid_argument(fmt::format("--clip_grad {}: the largest gradient norm must be a "
                                            "finite number >= 0 (0: no clipping)", max_norm));
  // Off, or one rank: nothing to sum over (and no duplicate: this constructor is then local).
  if (on() && split_over && split_over->size() > 1) group_ = split_over->duplicate();
}

float GradClip::coefficient(const std::vector<Tensor>& owned, float inv_scale) {
  if (!on()) return 1.0f;
  // Σ g² of this rank's owned elements, each part on its own device (a GPU returns its sum).
  Tensor sum = Tensor::zeros({1}, DType::kF64);
  for (const Tensor& t : owned)
    if (t.numel() > 0)
      sum.data<double>()[0] += kernel_ops(t.device()).sum_of_squares(as_stored(t), t.numel());
  // ... over the ranks that own the rest: sends 2(N-1)/N·8 bytes, on the duplicate.
  if (group_) group_->all_reduce(sum, ReduceOp::kSum);
  last_norm_ = std::sqrt(sum.data<double>()[0]) * static_cast<double>(inv_scale);
  return clip_coefficient(last_norm_, max_norm_);
}

std::string GradClip::step_note() const {
  if (!on() || std::isnan(last_norm_)) return "";
  return fmt::format(" | grad norm {:.6g}{}", last_norm_,
                     clip_coefficient(last_norm_, max_norm_) < 1.0f ? " (clipped)" : "");
}

}  // namespace llmp
