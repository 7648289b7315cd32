#include "stages/zero1/zero1.h"

#include <stdexcept>
#include <string>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/train/constant_buffer.h"

namespace llmp {

Zero1Strategy::Zero1Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
                             MixedPrecisionConfig mp, double constant_buffer_mb)
    : MixedPrecisionStrategy(model, mp, &dp,
                             GradClip(opt.clip_grad, &dp)),  // ‖g‖² = Σ over dp of the shards'
      model_(model),
      dp_(dp),
      shards_(model.layout().num_params(), dp.size()),
      params_(mp_.new_buffer(model.layout().num_params(), MemCategory::kParameters)),
      grads_(mp_.new_buffer(model.layout().num_params(), MemCategory::kGradients)),
      opt_(shards_.padded, opt,
           slice_ranges(decay_ranges(model.layout(), opt.decay), shards_.begin[dp.rank()],
                        shards_.count[dp.rank()]),
           mp_.dtype(), model.device()),  // m, v (mixed: and the master weights): ⌈Ψ/N⌉ each,
                                          // the only shards; on the model's device
      metrics_(dp),
      cb_bytes_(llmp::constant_buffer_cap(constant_buffer_mb, mp_.dtype())) {
  // On a device everything above is device memory and the collectives take device tensors (the
  // MPI backend stages them); the constant buffer is a host buffer (constant_buffer.h): refused.
  if (cb_bytes_ > 0 && model.device() != Device::kCPU)
    throw std::invalid_argument("Zero1Strategy: the constant buffer is host memory; --device " +
                                std::string(to_string(model.device())) +
                                " runs without --constant_buffer_mb");
  // Same seed on every rank: same replicas; the master shard is this rank's slice of them.
  mp_.init(seed, params_, opt_, shards_.begin[dp.rank()]);
}

BatchSlice Zero1Strategy::batch_slice(int global_batch) const {
  return rank_slice(global_batch, dp_.rank(), dp_.size());  // [r·B/N, (r+1)·B/N)
}

double Zero1Strategy::train_step(const int32_t* tokens, const int32_t* targets, int global_batch,
                                 int T, int64_t step) {
  const int B = global_batch / dp_.size();  // this rank's sequences
  const float scale = 1.0f / (static_cast<float>(global_batch) * T);  // global mean
  const double bytes_before = dp_.stats().total_bytes();
  const int r = dp_.rank();
  const int64_t begin = shards_.begin[r], count = shards_.count[r];
  if (cb_bytes_ > 0) MemoryTracker::instance().reset_peak();  // the step's kCommBuffers peak

  // 1. Forward and backward on the local (B/N, T) slice into the full gradient buffer (Ψ).
  //    With loss_scale 1/(B·T), the sum over ranks is the gradient of the global mean loss
  //    (fp16: times the loss scale S).
  grads_.fill(0.0f);
  mp_.begin_step();
  FlatParams params(model_.layout(), params_);
  FlatGrads grads(model_.layout(), grads_, {}, mp_.round_stats());
  const double local_loss = UnitRunner(model_, params, &grads)
                                .forward_backward(tokens, targets, B, T,
                                                  mp_.walk_loss_scale(scale, step));

  // 2. Reduce-scatter: this rank receives Σ_ranks grads[begin, begin + count), its shard only.
  //    sends (N-1)/N · b·Ψ (b = 4, or 2 for 16-bit gradients). The receive buffer is
  //    communication scratch, freed after step 3.
  //    Constant buffer: chunk by chunk from the top (one reduce-scatter each, the same bytes in
  //    all), this rank's part written in place into grads_[begin, begin + count).
  Tensor grad_shard;
  if (cb_bytes_ > 0) {
    grad_shard = grads_.narrow(begin, count);  // a view: no receive buffer
    ConstantBuffer buffer(cb_bytes_, grads_.dtype(),
                          reduce_scatter_collective(dp_, shards_, grad_shard));
    buffer.add(0, grads_);  // cut into chunks of the bound, each reduce-scattered when full
    buffer.flush();         // the last, partial chunk: [0, Ψ mod c)
    last_step_chunks_ = buffer.collectives();
    last_step_peak_cb_ = MemoryTracker::instance().peak(MemCategory::kCommBuffers);
  } else {
    grad_shard = Tensor::empty({count}, grads_.dtype(), MemCategory::kCommBuffers,
                               grads_.device());  // beside the gradients it is reduced from
    dp_.reduce_scatter_v(grads_, grad_shard, shards_.count, ReduceOp::kSum);
  }

  // 3. AdamW on this rank's shard only: params[begin, begin + count) with m, v of size S
  //    (mixed: the master shard, rounded into the 16-bit slice; fp16 skips an overflowed step on
  //    every rank together).
  //    --clip_grad: ‖g‖² is Σ over dp of each shard's valid part's Σ g² (one 8-byte all_reduce).
  mp_.optimizer_step(opt_, params_.narrow(begin, count), grad_shard, step, count, &clip_);
  grad_shard = Tensor();

  // 4. All-gather the updated shards into the full parameters on every rank.
  //    sends (N-1)/N · b·Ψ. The input is this rank's slice of the output: gathered in place.
  dp_.all_gather_v(params_.narrow(begin, count), params_, shards_.count);

  last_step_bytes_ = dp_.stats().total_bytes() - bytes_before;
  return metrics_.sum(mp_.mixed() ? mp_.unscale_loss(local_loss, scale, step) : local_loss);
}

double Zero1Strategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                                int T) {
  // Every rank its B/N sequences; 16-bit parameters widened unit by unit (dp_util.h).
  return dp_eval_loss(model_, params_, tokens, targets, global_batch, T, dp_, metrics_);
}

void Zero1Strategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  copy_sharded_optimizer_state_out(dp_, shards_, params_, opt_, params, exp_avg, exp_avg_sq);
}

void Zero1Strategy::set_state(const float* params, const float* exp_avg,
                              const float* exp_avg_sq) {
  copy_sharded_optimizer_state_in(dp_, shards_, params_, opt_, params, exp_avg, exp_avg_sq);
}

std::vector<ReportRow> Zero1Strategy::report() const {
  const double psi = static_cast<double>(shards_.psi);
  const int N = dp_.size();
  const MemoryPlan plan = plan_memory(DPStage::kZeRO1, psi, N, mp_.plan(), /*padded=*/true);
  const bool mixed = mp_.mixed();
  auto rows = mixed ? memory_rows(plan, "2Ψ", "2Ψ", "12⌈Ψ/N⌉")
                    : memory_rows(plan, "4Ψ", "4Ψ", "8⌈Ψ/N⌉");
  rows.push_back({"sent per step", last_step_bytes_,
                  plan_bytes_per_step(DPStage::kZeRO1, psi, N, mixed ? 2.0 : 4.0),
                  mixed ? "2(N-1)/N·2Ψ" : "2(N-1)/N·4Ψ"});
  if (cb_bytes_ > 0)  // the one fused buffer, measured
    rows.push_back({"comm buffer, peak in step", static_cast<double>(last_step_peak_cb_),
                    static_cast<double>(cb_bytes_), "cap"});
  return rows;
}

}  // namespace llmp
