#include "stages/naive_dp/naive_dp.h"

#include <chrono>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/runtime/log.h"

namespace llmp {

NaiveDPStrategy::NaiveDPStrategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt,
                                 uint64_t seed, MixedPrecisionConfig mp)
    : MixedPrecisionStrategy(model, mp, &dp,
                             GradClip(opt.clip_grad, nullptr)),  // a replica owns the whole g
      model_(model),
      dp_(dp),
      params_(mp_.new_buffer(model.layout().num_params(), MemCategory::kParameters)),
      grads_(mp_.new_buffer(model.layout().num_params(), MemCategory::kGradients)),
      opt_(model.layout().num_params(), opt, decay_ranges(model.layout(), opt.decay), mp_.dtype(),
           model.device()),  // --device cuda: m and v beside the parameters
      metrics_(dp) {
  mp_.init(seed, params_, opt_);  // same seed on every rank: same replicas (and master copies)
}

BatchSlice NaiveDPStrategy::batch_slice(int global_batch) const {
  return rank_slice(global_batch, dp_.rank(), dp_.size());  // [r·B/N, (r+1)·B/N)
}

double NaiveDPStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                   int global_batch, int T, int64_t step) {
  const int B = global_batch / dp_.size();  // this rank's sequences
  // 1/(global B·T), not 1/(local B·T): summing the ranks' gradients then gives the gradient of
  // the mean loss over the whole global batch, exactly what the single-rank baseline computes.
  const float scale = 1.0f / (static_cast<float>(global_batch) * T);
  const double bytes_before = dp_.stats().total_bytes();

  // 1. Forward and backward over the local slice: (B/N, T) tokens -> Ψ gradients. Mixed
  //    precision: each unit's gradients are accumulated in fp32 and rounded into the 16-bit
  //    buffer once final (FlatGrads); fp16 scales the loss by S.
  grads_.fill(0.0f);
  mp_.begin_step();
  FlatParams params(model_.layout(), params_);
  FlatGrads grads(model_.layout(), grads_, {}, mp_.round_stats());
  const double local_loss = UnitRunner(model_, params, &grads)
                                .forward_backward(tokens, targets, B, T,
                                                  mp_.walk_loss_scale(scale, step));

  // 2. Only now, with the whole backward done, sum the gradients over ranks: one all_reduce of
  //    the flat Ψ-element buffer, in place, in its own dtype (16-bit: 2 bytes per element, each
  //    pairwise addition in fp32, rounded).             sends 2(N-1)/N·4Ψ (mixed: 2(N-1)/N·2Ψ)
  const auto t0 = std::chrono::steady_clock::now();
  dp_.all_reduce(grads_, ReduceOp::kSum);
  all_reduce_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++steps_;

  // 3. The same AdamW update on every rank (same params, same summed grads: same result);
  //    fp16 skips it on every rank when any summed gradient is inf or nan (agreed over dp_).
  mp_.optimizer_step(opt_, params_, grads_, step, -1, &clip_);  // --clip_grad: ‖g‖ local

  last_step_bytes_ = dp_.stats().total_bytes() - bytes_before;
  // Σ_r of the local parts of the global mean (fp16: divided by the S the walk used).
  return metrics_.sum(mp_.unscale_loss(local_loss, scale, step));
}

double NaiveDPStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                  int global_batch, int T) {
  // Every rank its B/N sequences; 16-bit parameters widened unit by unit (dp_util.h).
  return dp_eval_loss(model_, params_, tokens, targets, global_batch, T, dp_, metrics_);
}

void NaiveDPStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // Replicated: this rank's copy is the full state.
  copy_replicated_state_out(params_, opt_, params, exp_avg, exp_avg_sq);
}

void NaiveDPStrategy::set_state(const float* params, const float* exp_avg,
                                const float* exp_avg_sq) {
  copy_replicated_state_in(params_, opt_, params, exp_avg, exp_avg_sq);
}

std::vector<ReportRow> NaiveDPStrategy::report() const {
  const double psi = static_cast<double>(params_.numel());
  const int N = dp_.size();
  const MemoryPlan plan = plan_memory(DPStage::kNaiveDP, psi, N, mp_.plan());
  const bool mixed = mp_.mixed();
  auto rows = mixed ? memory_rows(plan, "2Ψ", "2Ψ", "12Ψ") : memory_rows(plan, "4Ψ", "4Ψ", "8Ψ");
  rows.push_back({"sent per step", last_step_bytes_,
                  plan_bytes_per_step(DPStage::kNaiveDP, psi, N, mp_.plan().grad_bytes),
                  mixed ? "2(N-1)/N·2Ψ" : "2(N-1)/N·4Ψ"});
  return rows;
}

void NaiveDPStrategy::finish() {
  // Time is not bytes: a line of its own (compare with DDP's "hidden communication").
  log_all_ranks("naive_dp: blocking all_reduce {:.2f} ms per step, all of it exposed (mean of {} "
                "steps)",
                mean_all_reduce_ms(), steps_);
}

}  // namespace llmp
