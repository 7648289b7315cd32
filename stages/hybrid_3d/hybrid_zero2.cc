// HybridStrategy under --zero 2 (see hybrid_3d.h for the grid, zero2_grads.h for the sink and
// its closed forms). One step:
//   1. the pipeline schedule; every micro-batch's unit gradients reduce-scattered over dp into
//      the ⌈Ψ_r/dp⌉ shard as they become final (unit 0 / the wte copy deferred when p > 1);
//   2. the tied wte: the deferred whole wte summed over {first stage, last stage} (4VC/t, once),
//      then reduce-scattered once into the shard;
//   3. sequence parallelism: the replicated tensors' gradients all-reduced over tp ON THE SHARD
//      (every tp rank of a stage has the same layout, hence the same shard boundaries):
//      2(t-1)/t·4·|Ψ_repl,r ∩ shard| instead of 2(t-1)/t·4·Ψ_repl,r;
//   4. --clip_grad's norm from the shard (over the world: hybrid_3d.h), AdamW on the shard,
//      all_gather of the parameters over dp: (dp-1)/dp·p_b·Ψ_r (p_b = 2 in bf16/fp16; the
//      gradients and so every reduce_scatter stay fp32).
#include <algorithm>
#include <utility>

#include "common/runtime/clock.h"
#include "common/tensor/memory.h"
#include "stages/hybrid_3d/hybrid_3d.h"
#include "stages/hybrid_3d/zero2_grads.h"

namespace llmp {
namespace {

/// The parts of the replicated ranges (local offset, numel) that fall in [begin, begin + count),
/// as (offset into the shard, numel).
std::vector<std::pair<int64_t, int64_t>> replicated_in_shard(
    const std::vector<std::pair<int64_t, int64_t>>& repl, int64_t begin, int64_t count) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (auto [at, len] : repl) {
    const int64_t a = std::max(at, begin), b = std::min(at + len, begin + count);
    if (a < b) out.push_back({a - begin, b - a});
  }
  return out;
}

int64_t total(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  int64_t n = 0;
  for (auto [at, len] : ranges) n += len;
  return n;
}

}  // namespace

double HybridStrategy::zero2_backward(const int32_t* tokens, const int32_t* targets,
                                      int global_batch, int T, double t0, double* t_opt) {
  const bool defer = in_emb_ && emb_->size() > 1;  // the two copies of wte: p > 1
  grad_shard_.fill(0.0f);
  PipelineZero2Grads sink(model_.layout(), *part_, pp_.rank(), grid_.dp_group(), shards_,
                          grad_shard_, defer);
  // 1. The schedule; losses scaled by 1/(B·T), B global; the sink reduce-scatters as it goes.
  exec_->set_loss_batch(global_batch);
  const double loss =
      exec_->run(params_, sink, tokens, targets, global_batch / shape_.dp, T, t0);
  *t_opt = wall_seconds();
  // 2. The tied wte: both copies' whole gradients summed over the pair (sends 4VC/t), then the
  //    one reduce_scatter of the deferred unit: (dp-1)/dp·4·D_r.
  if (defer) {
    Tensor w = sink.deferred().narrow(0, model_.layout().find("wte.weight").numel);
    emb_->all_reduce(w, ReduceOp::kSum);
    sink.flush_deferred();
  }
  // 3. Sequence parallelism: Σ_tp of the replicated gradients, on the shard.
  if (shape_.sp) {
    const int d = grid_.dp_rank();
    const auto in = replicated_in_shard(repl_, shards_.begin[d], shards_.count[d]);
    // sends 2(t-1)/t·4·|Ψ_repl,r ∩ shard|
    all_reduce_packed(*grad_group, grad_shard_, in);
  }
  return loss;
}

void HybridStrategy::zero2_step(int64_t step) {
  ProcessGroup& dp = grid_.dp_group();
  const int d = dp.rank();
  const int64_t begin = shards_.begin[d], count = shards_.count[d];
  shard_step(grad_shard_, step);  // AdamW on the valid part; --clip_grad, fp16's skip
  // all_gather: every replica again holds all Ψ_r parameters. (dp-1)/dp·p_b·Ψ_r
  dp.all_gather_v(params_.narrow(begin, count), params_, shards_.count);
}

void HybridStrategy::zero2_rows(std::vector<ReportRow>* rows) const {
  const bool defer = in_emb_ && emb_->size() > 1;
  const PipelineZero2Plan z = pipeline_zero2_plan(model_.layout(), *part_, pp_.rank(), shape_.dp,
                                                  shape_.m, defer, bytes().param);
  const int d = grid_.dp_rank(), t = shape_.tp;
  const double repl = double(total(replicated_in_shard(repl_, shards_.begin[d], shards_.count[d])));
  for (ReportRow& r : *rows) {
    if (r.what == "gradients") r.formula_text = "4⌈Ψ_r/dp⌉";
    if (r.what == "sent per step (dp group)")
      r.formula = z.dp_bytes,
      r.formula_text = mp_.mixed() ? "(dp-1)/dp·(4(m(Ψ_r-D_r)+D_r)+2Ψ_r)"
                                   : "(dp-1)/dp·4(m(Ψ_r-D_r)+D_r+Ψ_r)";
    if (r.what == "sent per step (tp repl. grads)")
      r.formula = 2.0 * (t - 1) / t * 4.0 * repl, r.formula_text = "2(t-1)/t·4|Ψ_repl,r∩shard|";
  }
  rows->push_back({"gradients, peak in step", measured_.grads_peak, z.grads_peak,
                   "4(⌈Ψ_r/dp⌉+W0_r+largest unit)"});
  rows->push_back({"dp calls per step (1 B = 1 call)", double(measured_.dp_calls),
                   double(z.dp_calls), "m·U_r + [D_r>0] + 1"});
}

}  // namespace llmp
