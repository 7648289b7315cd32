#include "stages/zero2/zero2.h"

#include <algorithm>
#include <cstring>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"

namespace llmp {

Zero2Strategy::Zero2Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed)
    : model_(model),
      dp_(dp),
      shards_(model.layout().num_params(), dp.size()),
      params_(Tensor::empty({model.layout().num_params()}, DType::kF32, MemCategory::kParameters)),
      grad_shard_(Tensor::zeros({shards_.padded}, DType::kF32, MemCategory::kGradients)),
      opt_(shards_.padded, opt,
           slice_ranges(decay_ranges(model.layout(), opt.decay), shards_.begin[dp.rank()],
                        shards_.count[dp.rank()])),
      metrics_(dp) {
  model_.init_params(params_.f32(), seed);  // same seed on every rank: same replicas
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

  // 1-2. Forward with the full parameters; backward unit by unit, each unit's gradient
  // reduce-scattered into grad_shard_ as soon as it is final, then freed (ReduceScatterGrads).
  FlatParams params(model_.layout(), params_.f32());
  ReduceScatterGrads grads(model_.layout(), dp_, shards_, grad_shard_);
  const double local_loss = UnitRunner(model_, params, &grads).forward_backward(tokens, targets,
                                                                                B, T, scale);
  last_step_peak_grads_ = MemoryTracker::instance().peak(MemCategory::kGradients);

  // 3. AdamW on this rank's shard only (the valid part of a padded shard).
  const int r = dp_.rank();
  const int64_t begin = shards_.begin[r], count = shards_.count[r];
  opt_.step(params_.f32() + begin, grad_shard_.f32(), step, count);

  // 4. All-gather the updated shards into the full parameters on every rank.
  //    sends (N-1)/N · 4Ψ. The input is this rank's slice of the output: gathered in place.
  dp_.all_gather_v(params_.narrow(begin, count), params_, shards_.count);

  last_step_bytes_ = dp_.stats().total_bytes() - bytes_before;
  return metrics_.sum(local_loss);
}

double Zero2Strategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                                int T) {
  return dp_eval_loss(model_, params_.f32(), tokens, targets, global_batch, T, dp_, metrics_);
}

void Zero2Strategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  std::memcpy(params, params_.f32(), shards_.psi * sizeof(float));
  // Adam's m and v are sharded: gather them (sends (N-1)/N · 4Ψ each; not part of a step).
  gather_shards_out(dp_, shards_, {{&opt_.exp_avg(), exp_avg}, {&opt_.exp_avg_sq(), exp_avg_sq}});
}

void Zero2Strategy::set_state(const float* params, const float* exp_avg,
                              const float* exp_avg_sq) {
  std::memcpy(params_.f32(), params, shards_.psi * sizeof(float));  // replicated
  copy_shard_in(shards_, dp_.rank(), exp_avg, opt_.exp_avg());          // sharded: keep my part
  copy_shard_in(shards_, dp_.rank(), exp_avg_sq, opt_.exp_avg_sq());
}

std::vector<ReportRow> Zero2Strategy::report() const {
  const double psi = static_cast<double>(shards_.psi);
  const int N = dp_.size();
  auto rows = memory_rows(plan_memory(DPStage::kZeRO2, psi, N, Precision::fp32(), /*padded=*/true),
                          "4Ψ", "4⌈Ψ/N⌉", "8⌈Ψ/N⌉");
  // The full gradient never exists: at most the shard, unit 0 and one other unit at a time.
  const GPTLayout& lay = model_.layout();
  int64_t largest = 0;
  for (int u = 1; u < lay.num_units(); ++u) largest = std::max(largest, lay.unit_numel(u));
  rows.push_back({"gradients, peak in step", static_cast<double>(last_step_peak_grads_),
                  4.0 * (shards_.padded + lay.unit_numel(0) + largest),
                  "4(⌈Ψ/N⌉ + unit 0 + largest unit)"});
  rows.push_back({"sent per step", last_step_bytes_,
                  plan_bytes_per_step(DPStage::kZeRO2, psi, N, 4.0), "2(N-1)/N·4Ψ"});
  return rows;
}

}  // namespace llmp
