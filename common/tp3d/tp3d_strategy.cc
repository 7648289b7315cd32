// Tp3dStrategy (see tp3d_strategy.h).
#include "common/tp3d/tp3d_strategy.h"

#include <cstring>
#include <utility>

#include "common/optim/decay_mask.h"
#include "common/plan/tp3d_formulas.h"
#include "common/tensor/memory.h"
#include "common/train/dp_util.h"

namespace llmp {
namespace {

// The decay ranges of this rank's buffer: a block is decayed when its whole tensor is.
std::vector<ElementRange> local_decay(const GPTConfig& cfg, const Layout3d& lay, DecayRule rule) {
  const std::vector<ElementRange> global = decay_ranges(GPTLayout(cfg), rule);
  std::vector<ElementRange> out;
  for (const Param3d& p : lay.params()) {
    bool decayed = false;
    for (const ElementRange& r : global) decayed |= p.global_offset >= r.begin && p.global_offset < r.end;
    if (!decayed) continue;
    if (!out.empty() && out.back().end == p.offset)
      out.back().end += p.numel;
    else
      out.push_back({p.offset, p.offset + p.numel});
  }
  return out;
}

}  // namespace

Tp3dStrategy::Tp3dStrategy(const GPTConfig& cfg, ProcessGroup& all, AdamWConfig opt,
                           uint64_t seed, Device device)
    : all_(all), cube_(all) {
  model_ = std::make_unique<Gpt3d>(cfg, cube_, device);
  const Layout3d& lay = model_->layout();
  const int64_t n = lay.num_params();
  params_ = Tensor::empty({n}, DType::kF32, MemCategory::kParameters, device);
  grads_ = Tensor::zeros({n}, DType::kF32, MemCategory::kGradients, device);
  opt_ = std::make_unique<AdamW>(n, opt, local_decay(cfg, lay, opt.decay), DType::kF32, device);
  const GPT whole(cfg);
  std::vector<float> full(whole.layout().num_params()), local(n);
  whole.init_params(full.data(), seed);
  lay.copy_from_full(full.data(), local.data());
  from_host(params_, local.data());  // copied up once on a device: 4Ψ_r
  clip_ = GradClip(opt.clip_grad, &all);  // collective over the cube when clipping
}

std::vector<Tensor> Tp3dStrategy::owned_grads() const {
  OwnedRanges owned;
  const Layout3d& lay = model_->layout();
  for (const Param3d& p : lay.params())
    if (lay.counts_once(p)) owned.add(p.offset, p.numel);
  return owned.views(grads_);
}

double Tp3dStrategy::train_step(const int32_t* tokens, const int32_t* targets, int global_batch,
                                int T, int64_t step) {
  ProcessGroup* groups[5] = {cube_.i_axis.get(), cube_.j_axis.get(), cube_.l_axis.get(),
                             cube_.plane_l.get(), cube_.plane_j.get()};
  double before[5];
  int64_t calls0 = 0;
  for (int k = 0; k < 5; ++k) {
    before[k] = groups[k]->stats().total_bytes();
    for (const auto& kv : groups[k]->stats().calls) calls0 += kv.second;
  }
  grads_.fill(0.0f);
  const double loss = model_->forward_backward(params_, &grads_, tokens, targets, global_batch, T);
  // --clip_grad: ‖g‖² = Σ over the cube of owned_grads()' squares (8 bytes, its own duplicate of
  // all_: the five groups' bytes and calls stay the formulas'), then AdamW times the coefficient.
  const float clip = clip_.coefficient(owned_grads());
  opt_->step(params_.f32(), grads_.f32(), step, -1, clip);
  calls_ = -calls0;
  for (int k = 0; k < 5; ++k) {
    bytes_[k] = groups[k]->stats().total_bytes() - before[k];
    for (const auto& kv : groups[k]->stats().calls) calls_ += kv.second;
  }
  last_B_ = global_batch, last_T_ = T;
  return loss;
}

double Tp3dStrategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                               int T) {
  return model_->forward_backward(params_, nullptr, tokens, targets, global_batch, T);
}

void Tp3dStrategy::to_full(const float* local, float* full) {
  // Every rank holds the same number of floats: gather them all, place each rank's blocks.
  const int P = all_.size(), q = cube_.q;
  const int64_t n = model_->layout().num_params();
  Tensor mine = Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers);
  std::memcpy(mine.f32(), local, n * sizeof(float));
  Tensor every = Tensor::empty({P * n}, DType::kF32, MemCategory::kCommBuffers);
  all_.all_gather(mine, every);  // not part of a step: (P-1)/P·4·P·Ψ_r
  for (int r = 0; r < P; ++r)
    Layout3d(model_->config(), q, r / (q * q), (r / q) % q, r % q)
        .copy_to_full(every.f32() + r * n, full);
}

void Tp3dStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // Each state's blocks down to the host (4Ψ_r bytes; a copy on the CPU), gathered there.
  std::vector<float> local(params_.numel());
  for (const auto& [state, out] : {std::pair<const Tensor*, float*>{&params_, params},
                                   {&opt_->exp_avg(), exp_avg},
                                   {&opt_->exp_avg_sq(), exp_avg_sq}}) {
    to_host(local.data(), *state);
    to_full(local.data(), out);
  }
}

void Tp3dStrategy::set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) {
  // This rank's blocks of each whole state, cut on the host and copied up (4Ψ_r each).
  const Layout3d& lay = model_->layout();
  std::vector<float> local(params_.numel());
  for (const auto& [full, state] : {std::pair<const float*, const Tensor*>{params, &params_},
                                    {exp_avg, &opt_->exp_avg()},
                                    {exp_avg_sq, &opt_->exp_avg_sq()}}) {
    lay.copy_from_full(full, local.data());
    from_host(*state, local.data());
  }
}

std::vector<ReportRow> Tp3dStrategy::report() const {
  const GPTConfig& c = model_->config();
  const Tp3dDims d{c.vocab, c.ctx, c.layers, c.d, c.heads};
  const int q = cube_.q;
  const double psi_r = tp3d_params_per_rank(d, q);
  Tp3dBytes f = tp3d_bytes_per_step(d, last_B_, last_T_, q);
  // Full recomputation: every block's forward once more, its collectives with it
  // (tp3d_formulas.h); selective sends nothing more (P is made from the rank's own q and k).
  const bool full = c.recompute == Recompute::kFull;
  const bool flash = c.attention == AttentionMethod::kFlash;  // lse kept, not P
  if (full) {
    const Tp3dBytes r = tp3d_recompute_bytes_per_step(d, last_B_, last_T_, q);
    f.i_axis += r.i_axis, f.j_axis += r.j_axis, f.l_axis += r.l_axis;
  }
  const auto again = [full](std::string text, const char* extra) {
    return full ? text + " + recompute " + extra : text;
  };
  const MemoryTracker& mt = MemoryTracker::instance();
  std::vector<ReportRow> rows = {
      {"parameters", double(mt.current(MemCategory::kParameters)), 4 * psi_r,
       "4Ψ_r, Ψ_r = (VC+12LC²)/q³ + (ctx+13L+2)C/q"},
      {"gradients", double(mt.current(MemCategory::kGradients)), 4 * psi_r, "4Ψ_r"},
      {"optimizer state", double(mt.current(MemCategory::kOptimizerState)), 8 * psi_r, "8Ψ_r"},
      {"activations per block", model_->last_block_bytes(),
       tp3d_activation_bytes_per_block(d, last_B_, last_T_, q, c.recompute, c.recompute_every,
                                       flash),
       tp3d_activation_formula_text(c.recompute, flash)},
      {"sent per step (i-axis group)", bytes_[0], f.i_axis,
       again("12f/q²·(12LC²+VC)", "48f/q²·LC²")},
      {"sent per step (j-axis group)", bytes_[1], f.j_axis,
       again("4f/q²·(8L+2)·BTC + 24f·BT/q²", "16f/q²·L·BTC")},
      {"sent per step (l-axis group)", bytes_[2], f.l_axis,
       again("4f/q²·(24LC+2V)·BT + 32f·(2L+1)·BT/q²", "48f/q²·L·BTC + 32f·L·BT/q²")},
      {"sent per step (plane group, same l)", bytes_[3], f.plane_l,
       "8f2·BTC/q + 8f2·(ctx+6L+2)C/q"},
      {"sent per step (plane group, same j)", bytes_[4], f.plane_j, "8f2·7LC/q + 16f2"}};
  ReportRow calls{"collective calls per step", double(calls_),
                  double(tp3d_calls_per_step(d) + (full ? tp3d_recompute_calls_per_step(d) : 0)),
                  full ? "34L+17 + 16L (recompute)" : "34L+17"};
  calls.count = true;
  rows.push_back(calls);
  return rows;
}

}  // namespace llmp
