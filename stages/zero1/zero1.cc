#include "stages/zero1/zero1.h"

#include <cstring>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"

namespace llmp {

Zero1Strategy::Zero1Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed)
    : model_(model),
      dp_(dp),
      shards_(model.layout().num_params(), dp.size()),
      params_(Tensor::empty({model.layout().num_params()}, DType::kF32, MemCategory::kParameters)),
      grads_(Tensor::zeros({model.layout().num_params()}, DType::kF32, MemCategory::kGradients)),
      opt_(shards_.padded, opt,
           slice_ranges(decay_ranges(model.layout(), opt.decay), shards_.begin[dp.rank()],
                        shards_.count[dp.rank()])),  // m, v: ⌈Ψ/N⌉ each, the only sharded state
      metrics_(dp) {
  model_.init_params(params_.f32(), seed);  // same seed on every rank: same replicas
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

  // 1. Forward and backward on the local (B/N, T) slice into the full gradient buffer (Ψ).
  //    With loss_scale 1/(B·T), the sum over ranks is the gradient of the global mean loss.
  grads_.fill(0.0f);
  const double local_loss =
      forward_backward(model_, params_.f32(), grads_.f32(), tokens, targets, B, T, scale);

  // 2. Reduce-scatter: this rank receives Σ_ranks grads[begin, begin + count), its shard only.
  //    sends (N-1)/N · 4Ψ. The receive buffer is communication scratch, freed after step 3.
  Tensor grad_shard = Tensor::empty({count}, DType::kF32, MemCategory::kCommBuffers);
  dp_.reduce_scatter_v(grads_, grad_shard, shards_.count, ReduceOp::kSum);

  // 3. AdamW on this rank's shard only: params[begin, begin + count) with m, v of size S.
  opt_.step(params_.f32() + begin, grad_shard.f32(), step, count);
  grad_shard = Tensor();

  // 4. All-gather the updated shards into the full parameters on every rank.
  //    sends (N-1)/N · 4Ψ. The input is this rank's slice of the output: gathered in place.
  dp_.all_gather_v(params_.narrow(begin, count), params_, shards_.count);

  last_step_bytes_ = dp_.stats().total_bytes() - bytes_before;
  return metrics_.sum(local_loss);
}

double Zero1Strategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                                int T) {
  return dp_eval_loss(model_, params_.f32(), tokens, targets, global_batch, T, dp_, metrics_);
}

void Zero1Strategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  std::memcpy(params, params_.f32(), shards_.psi * sizeof(float));
  // Adam's m and v are sharded: gather them (sends (N-1)/N · 4Ψ each; not part of a step).
  gather_shards_out(dp_, shards_, {{&opt_.exp_avg(), exp_avg}, {&opt_.exp_avg_sq(), exp_avg_sq}});
}

void Zero1Strategy::set_state(const float* params, const float* exp_avg,
                              const float* exp_avg_sq) {
  std::memcpy(params_.f32(), params, shards_.psi * sizeof(float));  // replicated
  copy_shard_in(shards_, dp_.rank(), exp_avg, opt_.exp_avg());          // sharded: keep my part
  copy_shard_in(shards_, dp_.rank(), exp_avg_sq, opt_.exp_avg_sq());
}

std::vector<ReportRow> Zero1Strategy::report() const {
  const double psi = static_cast<double>(shards_.psi);
  const int N = dp_.size();
  auto rows = memory_rows(plan_memory(DPStage::kZeRO1, psi, N, Precision::fp32(), /*padded=*/true),
                          "4Ψ", "4Ψ", "8⌈Ψ/N⌉");
  rows.push_back({"sent per step", last_step_bytes_,
                  plan_bytes_per_step(DPStage::kZeRO1, psi, N, 4.0), "2(N-1)/N·4Ψ"});
  return rows;
}

}  // namespace llmp
