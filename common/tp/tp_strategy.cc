// TensorParallelStrategy (see tp_strategy.h).
#include "common/tp/tp_strategy.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/plan/recompute_formulas.h"
#include "common/plan/tp_formulas.h"
#include "common/tensor/memory.h"
#include "common/train/dp_util.h"

namespace llmp {

namespace {
// Collective calls a group has counted so far, every operation together.
int64_t calls_of(const ProcessGroup& g) {
  int64_t n = 0;
  for (const auto& kv : g.stats().calls) n += kv.second;
  return n;
}
}  // namespace

TensorParallelStrategy::TensorParallelStrategy(const GPTConfig& cfg, ProcessGroup& tp,
                                               AdamWConfig opt, uint64_t seed,
                                               bool sequence_parallel, Device device,
                                               MixedPrecisionConfig mp)
    // The slice and its groups (tp_model.h: three duplicates of tp, so that the re-gather's, the
    // replicated gradients' and Pa's bytes are counted apart from f's and g's); then the
    // precision, whose fp16 skip and --clip_grad norm are agreed over tp.
    : TpModel(cfg, tp, sequence_parallel, device, storage_dtype(mp.precision)),
      MixedPrecisionStrategy(*slice, mp, &tp, GradClip(opt.clip_grad, &tp)),
      tp_(tp),
      sp_(sequence_parallel) {
  const int64_t n = slice->layout().num_params();
  params_ = Tensor::empty({n}, mp_.dtype(), MemCategory::kParameters, device);
  grads_ = Tensor::zeros({n}, mp_.dtype(), MemCategory::kGradients, device);
  opt_ = std::make_unique<AdamW>(n, opt, decay_ranges(slice->layout(), opt.decay),  // its slices'
                                 mp_.dtype(), device);  // dims; mixed: + the master copy
  // This rank's slice of the whole initialisation, made on the host and copied up once (4Ψ_r;
  // mixed: into the master copy, and 2Ψ_r of 16-bit parameters rounded from it).
  std::vector<float> init(n);
  slice->init_params(init.data(), seed);
  set_params(init.data());
}

std::vector<Tensor> TensorParallelStrategy::owned_grads() const {
  OwnedRanges owned;
  for (const ParamSpec& p : slice->layout().params())
    if (p.split != Split::kReplicated || tp_.rank() == 0) owned.add(p.offset, p.numel);  // tp 0
  return owned.views(grads_);
}

void TensorParallelStrategy::all_reduce_replicated_grads() {
  std::vector<std::pair<int64_t, int64_t>> replicated;  // the tensors every rank holds whole
  for (const ParamSpec& p : slice->layout().params())
    if (p.split == Split::kReplicated) replicated.push_back({p.offset, p.numel});
  all_reduce_packed(*grad_group, grads_, replicated);  // sends 2(t-1)/t·e·Ψ_repl
}

double TensorParallelStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                          int global_batch, int T, int64_t step) {
  const double tp0 = tp_.stats().total_bytes(), rg0 = regather_group->stats().total_bytes(),
               gs0 = grad_group->stats().total_bytes(),
               ck0 = checkpoint_group->stats().total_bytes();
  const std::vector<const ProcessGroup*> groups = {&tp_, regather_group.get(), grad_group.get(),
                                                   checkpoint_group.get()};
  int64_t calls0 = 0;
  for (const ProcessGroup* g : groups) calls0 += calls_of(*g);
  // 1. The walk over this rank's slice; f and g communicate inside it. The loss is the global
  //    mean: every rank sees the whole batch, scaled by 1/(B·T).
  //    Mixed precision: 16-bit parameters widened per unit, each unit's gradient rounded into
  //    the 16-bit buffer once; fp16's loss times S.
  grads_.fill(0.0f);
  mp_.begin_step();
  const float mean = 1.0f / (static_cast<float>(global_batch) * T);
  FlatParams source(slice->layout(), params_);
  FlatGrads sink(slice->layout(), grads_, {}, mp_.round_stats());
  UnitRunner runner(*slice, source, &sink);
  const double loss = mp_.unscale_loss(
      runner.forward_backward(tokens, targets, global_batch, T, mp_.walk_loss_scale(mean, step)),
      mean, step);
  block_bytes_ = static_cast<double>(runner.stats().forward_stored_bytes) / slice->config().layers;
  // 2. Sequence parallelism: the replicated parameters saw only this rank's rows.
  if (sp_) all_reduce_replicated_grads();
  // 3. --clip_grad: ‖g‖² = Σ over tp of owned_grads()' squares (Megatron's clip_grad_norm_fp32:
  //    the split tensors' slices on every rank, the replicated ones once), one 8-byte all_reduce.
  // 4. AdamW on the slice, the gradients times the clipping coefficient (mixed: on the master
  //    copy, rounded into the 16-bit slice; fp16: skipped on every rank when one rank's owned
  //    gradient holds an inf or nan, agreed over tp).
  const std::vector<Tensor> owned = owned_grads();
  mp_.optimizer_step(*opt_, params_, grads_, step, -1, &clip_, &owned);

  tp_bytes_ = tp_.stats().total_bytes() - tp0;
  regather_bytes_ = regather_group->stats().total_bytes() - rg0;
  grad_sync_bytes_ = grad_group->stats().total_bytes() - gs0;
  checkpoint_bytes_ = checkpoint_group->stats().total_bytes() - ck0;
  calls_ = -calls0;
  for (const ProcessGroup* g : groups) calls_ += calls_of(*g);
  last_B_ = global_batch, last_T_ = T;
  return loss;
}

double TensorParallelStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                         int global_batch, int T) {
  FlatParams source(slice->layout(), params_);  // f32, or 16-bit widened per unit
  return UnitRunner(*slice, source).forward_loss(tokens, targets, global_batch, T);
}

void tp_slices_to_full(ProcessGroup& tp, const GPTConfig& cfg, const float* slice, float* full) {
  // Every rank's slice (Ψ_r floats each, the same size on every rank) to every rank, then each
  // slice into its places in the whole model.
  const int t = tp.size();
  std::vector<GPTLayout> slices;  // every rank's layout: where its slice goes in the whole model
  for (int r = 0; r < t; ++r) slices.emplace_back(cfg, t, r);
  const int64_t n = slices[0].num_params();
  Tensor mine = Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers);
  std::memcpy(mine.f32(), slice, n * sizeof(float));
  Tensor all = Tensor::empty({t * n}, DType::kF32, MemCategory::kCommBuffers);
  tp.all_gather(mine, all);
  for (int r = 0; r < t; ++r) slices[r].copy_to_full(all.f32() + r * n, full);
}

void TensorParallelStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // Each state's slice down to the host (4Ψ_r bytes; a memcpy on the CPU), then gathered there:
  // sends (t-1)/t·4tΨ_r per state; not part of a step.
  const GPTConfig& cfg = slice->config();
  // Mixed precision: the fp32 master copy is the full-precision state a checkpoint keeps.
  const Tensor* p = opt_->has_master_weights() ? &opt_->master() : &params_;
  std::vector<float> slice(params_.numel());
  for (const auto& [state, out] : {std::pair<const Tensor*, float*>{p, params},
                                   {&opt_->exp_avg(), exp_avg},
                                   {&opt_->exp_avg_sq(), exp_avg_sq}}) {
    to_host(slice.data(), *state);
    tp_slices_to_full(tp_, cfg, slice.data(), out);
  }
}

void TensorParallelStrategy::set_state(const float* params, const float* exp_avg,
                                       const float* exp_avg_sq) {
  // This rank's slice of each whole state, cut on the host and copied up (4Ψ_r bytes each).
  const GPTLayout& lay = slice->layout();
  std::vector<float> slice(params_.numel());
  lay.copy_from_full(params, slice.data());
  set_params(slice.data());
  for (const auto& [full, state] : {std::pair<const float*, const Tensor*>{exp_avg, &opt_->exp_avg()},
                                    {exp_avg_sq, &opt_->exp_avg_sq()}}) {
    lay.copy_from_full(full, slice.data());
    from_host(*state, slice.data());
  }
}

void TensorParallelStrategy::set_params(const float* values) {
  if (!opt_->has_master_weights()) return from_host(params_, values);
  from_host(opt_->master(), values);
  round_from_host(params_, values);
}

std::vector<ReportRow> TensorParallelStrategy::report() const {
  const GPTConfig& c = slice->config();
  const TpModelDims d{c.padded_vocab(), c.ctx, c.layers, c.d, c.heads};
  const int t = tp_.size();
  const double psi_r = tp_params_per_rank(d, t);
  const MemoryTracker& mt = MemoryTracker::instance();
  // ZeRO-R Pa applies to the checkpoints of full recomputation, and not under SP (already split).
  const bool full = c.recompute == Recompute::kFull;  // each block's forward, g included, twice
  const bool pa = c.partition_checkpoints && full && !sp_;
  const bool flash = c.attention == AttentionMethod::kFlash;  // lse kept, not P
  // Mixed precision: 2-byte parameters, gradients and activations (so every message of f, g and
  // the sequence collectives), AdamW's master copy with m and v; the cross-entropy's 12BT fp32.
  const bool mixed = mp_.mixed();
  const int e = static_cast<int>(dtype_size(slice->activation_dtype()));
  const std::string E = std::to_string(e);
  const double pe = mixed ? 2 : 4;
  std::string act_text = pa ? "⌈L/k⌉/L·" + E + "sbh/t (Pa)"
                         : c.recompute != Recompute::kNone
                             ? activation_formula_text(c.recompute, c.recompute_every, e)
                         : flash && sp_ ? (e == 4 ? "sbh/t·(64+4a/h)+16sb/t (flash)"
                                                  : "sbh/t·(32+4a/h)+16sb/t (flash)")
                         : flash ? (e == 4 ? "sbh(16+48/t+4a/(ht))+16sb (flash)"
                                           : "sbh(8+24/t+4a/(ht))+16sb (flash)")
                         : sp_ ? (e == 4 ? "sbh/t·(64+4as/h)+16sb/t" : "sbh/t·(32+2as/h)+16sb/t")
                               : (e == 4 ? "sbh(16+48/t+4as/(ht))+16sb"
                                         : "sbh(8+24/t+2as/(ht))+16sb");
  const std::string tp_text = "2(t-1)/t·((4L+2)·" + E + "BTC+12BT)";
  std::vector<ReportRow> rows = {
      {"parameters", double(mt.current(MemCategory::kParameters)), pe * psi_r,
       std::string(mixed ? "2Ψ_r" : "4Ψ_r") + " (Ψ_r: sharded + replicated)"},
      {"gradients", double(mt.current(MemCategory::kGradients)), pe * psi_r,
       mixed ? "2Ψ_r" : "4Ψ_r"},
      {"optimizer state", double(mt.current(MemCategory::kOptimizerState)),
       (mixed ? 12 : 8) * psi_r, mixed ? "12Ψ_r (master, m, v)" : "8Ψ_r"},
      {"activations per block", block_bytes_,
       activation_bytes_per_block({last_B_, last_T_, c.d, c.heads, c.layers, t, sp_, pa, flash},
                                  c.recompute, c.recompute_every, e),
       act_text},
      {"sent per step (tp group)", tp_bytes_,
       tp_bytes_per_step(d, last_B_, last_T_, t, e) +
           (full ? tp_recompute_bytes_per_step(d, last_B_, last_T_, t, e) : 0),
       full ? tp_text + " + 4L(t-1)/t·" + E + "BTC (g again in recompute)" : tp_text}};
  if (pa) {  // every segment's checkpoint gathered once before its recomputation
    const double k = c.recompute_every, segments = std::ceil(c.layers / k);
    rows.push_back({"sent per step (Pa all_gather)", checkpoint_bytes_,
                    segments * (t - 1.0) / t * e * last_B_ * last_T_ * c.d,
                    "⌈L/k⌉·(t-1)/t·" + E + "BTC"});
  }
  if (sp_) {
    rows.push_back({"sent per step (re-gather)", regather_bytes_,
                    sp_regather_bytes_per_step(d, last_B_, last_T_, t, e),
                    "2L·(t-1)/t·" + E + "BTC"});
    rows.push_back({"sent per step (repl. grads)", grad_sync_bytes_,
                    sp_replicated_grad_bytes_per_step(d, t, mixed ? 2 : 4),
                    "2(t-1)/t·" + E + "(ctx·C+6LC+2C)"});
  }
  ReportRow calls{"collective calls per step", double(calls_),
                  tp_collective_calls_per_step(d, last_B_, last_T_, t, sp_, full,
                                               c.recompute_every, pa),
                  std::string(sp_ ? "10L+5" : "4L+2") +
                      (t > 1 ? "+2⌈BT/R⌉, R rows per CE chunk" : " (t = 1: no CE reductions)")};
  if (full) calls.formula_text += sp_ ? " +4L (recompute)" : " +2L (recompute)";
  if (pa) calls.formula_text += " +⌈L/k⌉ (Pa)";
  calls.count = true;
  rows.push_back(calls);
  return rows;
}

}  // namespace llmp
