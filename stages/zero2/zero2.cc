#include "stages/zero2/zero2.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/train/constant_buffer.h"

namespace llmp {

Zero2Strategy::Zero2Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
                             MixedPrecisionConfig mp, double constant_buffer_mb,
                             bool offload_optimizer)
    : MixedPrecisionStrategy(model, mp, &dp,
                             GradClip(opt.clip_grad, &dp)),  // ‖g‖² = Σ over dp of the shards'
      model_(model),
      dp_(dp),
      shards_(model.layout().num_params(), dp.size()),
      params_(mp_.new_buffer(model.layout().num_params(), MemCategory::kParameters)),
      // Offloaded: the gradient shard and the optimizer on the host, whatever the model's device.
      // 16-bit: the shard stays 16-bit there (what crosses down, 2 bytes per element).
      grad_shard_(offload_optimizer
                      ? Tensor::zeros({shards_.padded}, mp_.dtype(), MemCategory::kGradients)
                      : mp_.new_buffer(shards_.padded, MemCategory::kGradients)),
      opt_(shards_.padded, opt,
           slice_ranges(decay_ranges(model.layout(), opt.decay), shards_.begin[dp.rank()],
                        shards_.count[dp.rank()]),
           mp_.dtype(),  // --device cuda: the shard's m and v on the GPU, unless offloaded
           offload_optimizer ? Device::kCPU : model.device()),
      offload_(offload_optimizer),
      metrics_(dp),
      cb_bytes_(llmp::constant_buffer_cap(constant_buffer_mb, mp_.dtype())) {
  const std::string dev = to_string(model.device());
  if (cb_bytes_ > 0 && model.device() != Device::kCPU)
    throw std::invalid_argument("Zero2Strategy: the constant buffer is host memory; --device " +
                                dev + " runs without --constant_buffer_mb");
  if (offload_) {
    const std::string err = offload_error("Zero2Strategy", model.device());
    if (!err.empty()) throw std::invalid_argument(err);
  }
  // Same seed on every rank: same replicas; the master shard is this rank's slice of them.
  mp_.init(seed, params_, opt_, shards_.begin[dp.rank()]);
  if (offload_)  // fp32: the host's master copy of the shard, copied down once (16-bit: AdamW's)
    offloaded_ = std::make_unique<OffloadedShard>(
        params_.narrow(shards_.begin[dp.rank()], shards_.count[dp.rank()]), shards_.padded);
}

BatchSlice Zero2Strategy::batch_slice(int global_batch) const {
  return rank_slice(global_batch, dp_.rank(), dp_.size());  // [r·B/N, (r+1)·B/N)
}

double Zero2Strategy::train_step(const int32_t* tokens, const int32_t* targets, int global_batch,
                                 int T, int64_t step) {
  const int B = global_batch / dp_.size();  // this rank's sequences
  const float scale = 1.0f / (static_cast<float>(global_batch) * T);  // global mean
  const double bytes_before = dp_.stats().total_bytes();
  MemoryTracker::instance().reset_peak();
  mp_.begin_step();

  // 1-2. Forward with the full parameters; backward unit by unit, each unit's gradient
  // reduce-scattered into grad_shard_ as soon as it is final, then freed (ReduceScatterGrads;
  // 16-bit: rounded once from its fp32 accumulator, sent as 2 bytes per element).
  // With the constant buffer the units are packed into it instead, and each full buffer (then
  // the last, partial one) is reduce-scattered into grad_shard_.
  FlatParams params(model_.layout(), params_);
  double local_loss = 0;
  if (cb_bytes_ > 0) {
    ConstantBuffer buffer(cb_bytes_, grad_shard_.dtype(),
                          reduce_scatter_collective(dp_, shards_, grad_shard_));
    ConstantBufferGrads grads(model_.layout(), buffer, grad_shard_.dtype(), mp_.round_stats());
    local_loss = UnitRunner(model_, params, &grads)
                     .forward_backward(tokens, targets, B, T, mp_.walk_loss_scale(scale, step));
    buffer.flush();  // the last, partial buffer: the lowest elements of unit 0
    last_step_chunks_ = buffer.collectives();
  } else {
    ReduceScatterGrads grads(model_.layout(), dp_, shards_, grad_shard_, mp_.round_stats());
    grads.set_unit_device(model_.device());  // offloaded: device units, host shard
    local_loss = UnitRunner(model_, params, &grads)
                     .forward_backward(tokens, targets, B, T, mp_.walk_loss_scale(scale, step));
  }
  last_step_peak_grads_ =  // offloaded: the device's (the host shard is always there)
      offload_ ? MemoryTracker::instance().peak(model_.device(), MemCategory::kGradients)
               : MemoryTracker::instance().peak(MemCategory::kGradients);
  last_step_peak_cb_ = MemoryTracker::instance().peak(MemCategory::kCommBuffers);

  // 3. AdamW on this rank's shard only (the valid part of a padded shard). Mixed: the master
  //    shard, rounded into the 16-bit slice; fp16 skips an overflowed step on every rank together.
  const int r = dp_.rank();
  const int64_t begin = shards_.begin[r], count = shards_.count[r];
  //    Offloaded: on the host's master shard, then copied up into the device parameters.
  if (offload_)
    offloaded_->step(mp_, opt_, grad_shard_, step, &clip_);  // b·count bytes up after the update
  else  // --clip_grad: ‖g‖² is Σ over dp of each shard's valid part's Σ g² (8-byte all_reduce)
    mp_.optimizer_step(opt_, params_.narrow(begin, count), grad_shard_, step, count, &clip_);

  // 4. All-gather the updated shards into the full parameters on every rank.
  //    sends (N-1)/N · b·Ψ (b = 4, or 2 for 16-bit). The input is this rank's slice of the
  //    output: gathered in place.
  dp_.all_gather_v(params_.narrow(begin, count), params_, shards_.count);

  last_step_bytes_ = dp_.stats().total_bytes() - bytes_before;
  return metrics_.sum(mp_.mixed() ? mp_.unscale_loss(local_loss, scale, step) : local_loss);
}

double Zero2Strategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                                int T) {
  // Every rank its B/N sequences; 16-bit parameters widened unit by unit (dp_util.h).
  return dp_eval_loss(model_, params_, tokens, targets, global_batch, T, dp_, metrics_);
}

void Zero2Strategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  copy_sharded_optimizer_state_out(dp_, shards_, params_, opt_, params, exp_avg, exp_avg_sq);
}

void Zero2Strategy::set_state(const float* params, const float* exp_avg,
                              const float* exp_avg_sq) {
  copy_sharded_optimizer_state_in(dp_, shards_, params_, opt_, params, exp_avg, exp_avg_sq);
  if (offload_) offloaded_->refresh();
}

std::vector<ReportRow> Zero2Strategy::report() const {
  const double psi = static_cast<double>(shards_.psi);
  const int N = dp_.size();
  const MemoryPlan plan = plan_memory(DPStage::kZeRO2, psi, N, mp_.plan(), /*padded=*/true);
  const bool mixed = mp_.mixed();
  auto rows = offload_ ? offload_memory_rows(model_.device(), (mixed ? 2 : 4) * psi,
                                             mixed ? "2Ψ" : "4Ψ", shards_.padded, mp_.dtype())
             : mixed    ? memory_rows(plan, "2Ψ", "2⌈Ψ/N⌉", "12⌈Ψ/N⌉")
                        : memory_rows(plan, "4Ψ", "4⌈Ψ/N⌉", "8⌈Ψ/N⌉");
  // The full gradient never exists. fp32: at most the shard, unit 0 and one other unit at a
  // time. 16-bit: the units accumulate in fp32 (kOther); only the 16-bit copy of the unit being
  // reduce-scattered is a gradient next to the shard (ReduceScatterGrads).
  const GPTLayout& lay = model_.layout();
  int64_t largest = 0, largest_any = lay.unit_numel(0);
  for (int u = 1; u < lay.num_units(); ++u) largest = std::max(largest, lay.unit_numel(u));
  largest_any = std::max(largest_any, largest);
  if (mixed && offload_)  // the 16-bit shard is on the host: on the device one 16-bit unit
    rows.push_back({std::string("gradients on ") + to_string(model_.device()) + ", peak in step",
                    static_cast<double>(last_step_peak_grads_), 2.0 * largest_any,
                    "2·largest unit"});
  else if (mixed)
    rows.push_back({"gradients, peak in step", static_cast<double>(last_step_peak_grads_),
                    2.0 * (shards_.padded + largest_any), "2(⌈Ψ/N⌉ + largest unit)"});
  else if (offload_)  // the shard is on the host: on the device only the units, as they go
    rows.push_back({std::string("gradients on ") + to_string(model_.device()) + ", peak in step",
                    static_cast<double>(last_step_peak_grads_),
                    4.0 * (lay.unit_numel(0) + largest), "4(unit 0 + largest unit)"});
  else
    rows.push_back({"gradients, peak in step", static_cast<double>(last_step_peak_grads_),
                    4.0 * (shards_.padded + lay.unit_numel(0) + largest),
                    "4(⌈Ψ/N⌉ + unit 0 + largest unit)"});
  rows.push_back({"sent per step", last_step_bytes_,
                  plan_bytes_per_step(DPStage::kZeRO2, psi, N, mixed ? 2.0 : 4.0),
                  mixed ? "2(N-1)/N·2Ψ" : "2(N-1)/N·4Ψ"});
  if (cb_bytes_ > 0)  // the one fused buffer, measured
    rows.push_back({"comm buffer, peak in step", static_cast<double>(last_step_peak_cb_),
                    static_cast<double>(cb_bytes_), "cap"});
  return rows;
}

}  // namespace llmp
