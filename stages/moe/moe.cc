// The expert-parallel strategy (moe.h): the step, the state, and the report of what it measured.
#include "stages/moe/moe.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/runtime/log.h"
#include "common/train/moe_report.h"
#include "common/train/recompute_report.h"

namespace llmp {

MoeParamCounts MoeParamCounts::of(const GPTConfig& c, int ep) {
  const double C = c.d, E = c.experts, Lm = c.moe_blocks(), Ld = c.layers - Lm;
  MoeParamCounts n;
  n.dense = (c.vocab + c.ctx) * C + Ld * (12 * C * C + 13 * C) + Lm * (4 * C * C + 8 * C + C * E) +
            2 * C;
  n.experts = Lm * (E / ep) * (8 * C * C + 5 * C);
  return n;
}

double moe_all_to_all_bytes(const GPTConfig& c, int ep, int G, int T, int e) {
  const double cap = std::ceil(static_cast<double>(c.top_k) * T * c.capacity_factor / c.experts);
  const double buffer = static_cast<double>(e) * c.experts * G * std::max(1.0, cap) * c.d;  // (E,G,cap,C)
  const double per_block = c.recompute == Recompute::kFull ? 6.0 : 4.0;  // + the forward's two
  return per_block * c.moe_blocks() * (ep - 1.0) / ep * buffer;
}

GridShape expert_parallel_grid(int world_size, int ep) {
  return {world_size / ep, 1, ep};
}

ExpertParallelStrategy::ExpertParallelStrategy(const GPT& model, ProcessGrid& grid,
                                               AdamWConfig opt, uint64_t seed,
                                               MixedPrecisionConfig mp)
    : MixedPrecisionStrategy(model, mp, &grid.world(),  // fp16's skip agreed by all W ranks
                             GradClip(opt.clip_grad, &grid.world())),  // ‖g‖² Σ over them
      world_(grid.world()),
      edp_(grid.dp_group()),
      ep_(grid.tp_group().duplicate()),
      ep_comm_(*ep_),
      model_(model.with_expert_comm(&ep_comm_)),
      // --device cuda: parameters, gradients, m and v (and the master copy) on the model's
      // device; 16-bit parameters and gradients under mixed precision.
      params_(mp_.new_buffer(model_.layout().num_params(), MemCategory::kParameters)),
      grads_(mp_.new_buffer(model_.layout().num_params(), MemCategory::kGradients)),
      opt_(model_.layout().num_params(), opt, decay_ranges(model_.layout(), opt.decay),
           mp_.dtype(), model_.device()),
      metrics_(grid.world()),
      book_(grid.tp_group().duplicate()) {
  // The buffer's runs of dense and of expert tensors (each MoE unit: dense prefix, experts).
  for (const ParamSpec& p : model_.layout().params()) {
    // --clip_grad: a dense tensor is counted by world rank 0, an expert by the first rank of
    // the ranks holding it (expert-data-parallel rank 0), so each counts once in ‖g‖.
    if ((p.split == Split::kExpert ? edp_.rank() : world_.rank()) == 0)
      owned_.add(p.offset, p.numel);
    auto& runs = p.split == Split::kExpert ? expert_ : dense_;
    (p.split == Split::kExpert ? expert_numel_ : dense_numel_) += p.numel;
    if (!runs.empty() && runs.back().first + runs.back().second == p.offset)
      runs.back().second += p.numel;
    else
      runs.push_back({p.offset, p.numel});
  }
  // Each rank: its part of the whole model's init, on the host, then up once (4Ψ_r bytes; mixed:
  // into the master copy, and rounded on the host into the 16-bit parameters, 2Ψ_r bytes up).
  std::vector<float> init(model_.layout().num_params());
  model_.init_params(init.data(), seed);
  params_from_host(params_, opt_, init.data());
}

BatchSlice ExpertParallelStrategy::batch_slice(int global_batch) const {
  return rank_slice(global_batch, world_.rank(), world_.size());
}

namespace {
/// Σ over `group` of the runs of `buf`, through one packed kCommBuffers tensor in buf's dtype on
/// buf's device (the packing is device copies; a device buffer's all_reduce is staged by the
/// backend).
void all_reduce_runs(ProcessGroup& group, const Tensor& buf,
                     const std::vector<std::pair<int64_t, int64_t>>& runs, int64_t numel) {
  Tensor packed = Tensor::empty({numel}, buf.dtype(), MemCategory::kCommBuffers, buf.device());
  int64_t at = 0;
  for (const auto& [off, n] : runs) packed.narrow(at, n).copy_from(buf.narrow(off, n)), at += n;
  group.all_reduce(packed, ReduceOp::kSum);
  at = 0;
  for (const auto& [off, n] : runs) buf.narrow(off, n).copy_from(packed.narrow(at, n)), at += n;
}
}  // namespace

double ExpertParallelStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                          int global_batch, int T, int64_t step) {
  const int W = world_.size(), G = global_batch / W;
  const double a2a = ep_->stats().total_bytes(), dense = world_.stats().total_bytes(),
               expert = edp_.stats().total_bytes();
  model_.moe()->stats().reset(model_.config().experts);
  RecomputeMeter::instance().reset();  // the recomputation rows are this step's
  // 1. This rank's G sequences; the all_to_alls inside every MoE block. Mixed precision: each
  //    unit's gradient summed in fp32, rounded once into the 16-bit buffer (FlatGrads); fp16
  //    scales the loss by S.
  grads_.fill(0.0f);
  mp_.begin_step();
  const float scale = 1.0f / (static_cast<float>(global_batch) * T);
  FlatParams params(model_.layout(), params_);
  FlatGrads grads(model_.layout(), grads_, {}, mp_.round_stats());
  const double local = UnitRunner(model_, params, &grads)
                           .forward_backward(tokens, targets, G, T,
                                             mp_.walk_loss_scale(scale, step));
  // 2. Dense gradients: Σ over all W ranks.              sends 2(W-1)/W·4Ψ_d (mixed: ·2Ψ_d)
  all_reduce_runs(world_, grads_, dense_, dense_numel_);
  // 3. Expert gradients: complete on their rank when ep = W; else Σ over the ranks holding the
  //    same experts.                                     sends 2(D-1)/D·4Ψ_x (mixed: ·2Ψ_x)
  if (edp_.size() > 1) all_reduce_runs(edp_, grads_, expert_, expert_numel_);
  // 4. fp16: skipped on every rank when any rank's owned elements hold an inf or nan (agreed
  //    over the world). --clip_grad: ‖g‖² = Σ over all W ranks of the owned elements' squares
  //    (one 8-byte all_reduce on a duplicate of the world: the dense row's bytes stay the
  //    formula's).
  // 5. AdamW on this rank's parameters, the gradients times the clipping coefficient (and 1/S).
  const std::vector<Tensor> owned = owned_.views(grads_);
  mp_.optimizer_step(opt_, params_, grads_, step, -1, &clip_, &owned);
  last_a2a_ = ep_->stats().total_bytes() - a2a;
  last_dense_ = world_.stats().total_bytes() - dense;
  last_expert_ = edp_.stats().total_bytes() - expert;
  last_G_ = G, last_T_ = T;
  last_routing_ = sum_over(metrics_, model_.moe()->stats());
  last_meter_ = RecomputeMeter::instance();
  return metrics_.sum(mp_.unscale_loss(local, scale, step));  // fp16: divided by the S used
}

double ExpertParallelStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                         int global_batch, int T) {
  // Every rank its B/W sequences, the mean of the W means (dp_util.h), over all W ranks; 16-bit
  // parameters widened unit by unit as the walk reads them.
  return dp_eval_loss(model_, params_, tokens, targets, global_batch, T, world_, metrics_);
}

void ExpertParallelStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // Each expert lives on one rank of the expert-parallel group: write ours into zeros, Σ over
  // the group (the experts are disjoint), then the replicated tensors from this rank. On a
  // device, each local state comes down first (4Ψ_r bytes each); the gathering is on the host.
  // Mixed precision: the parameters' full-precision state is the fp32 master copy.
  const GPTLayout& lay = model_.layout();
  const int64_t full = GPTLayout(model_.config()).num_params();  // the whole model's Ψ
  Tensor buf = Tensor::empty({full}, DType::kF32, MemCategory::kOther);
  std::vector<float> host(lay.num_params());
  for (auto [state, out] : {std::pair<const Tensor*, float*>{&full_precision_params(params_, opt_),
                                                              params},
                            {&opt_.exp_avg(), exp_avg},
                            {&opt_.exp_avg_sq(), exp_avg_sq}}) {
    to_host(host.data(), *state);
    const float* local = host.data();
    buf.fill(0.0f);
    for (const ParamSpec& p : lay.params())
      if (p.split == Split::kExpert)
        std::memcpy(buf.f32() + p.global_offset, local + p.offset, p.numel * 4);
    book_->all_reduce(buf, ReduceOp::kSum);
    lay.copy_to_full(local, buf.f32());  // the replicated tensors (and ours again)
    std::memcpy(out, buf.f32(), full * 4);
  }
}

void ExpertParallelStrategy::set_state(const float* params, const float* exp_avg,
                                       const float* exp_avg_sq) {
  const GPTLayout& lay = model_.layout();
  std::vector<float> host(lay.num_params());  // this rank's part, then up (4Ψ_r bytes each)
  lay.copy_from_full(params, host.data());
  params_from_host(params_, opt_, host.data());  // mixed: the master copy, rounded into params_
  for (auto [in, state] : {std::pair<const float*, const Tensor*>{exp_avg, &opt_.exp_avg()},
                           {exp_avg_sq, &opt_.exp_avg_sq()}}) {
    lay.copy_from_full(in, host.data());
    from_host(*state, host.data());
  }
}

std::vector<ReportRow> ExpertParallelStrategy::report() const {
  const MemoryTracker& mt = MemoryTracker::instance();
  const GPTConfig& c = model_.config();
  const int W = world_.size(), ep = ep_->size(), D = W / ep;
  const MoeParamCounts n = MoeParamCounts::of(c, ep);
  const double psi = n.dense + n.experts;
  // Bytes per element: parameters and gradients (4 or 2), optimizer state (8, or 12 with the
  // master copy), and what the all_to_alls and all_reduces move (the buffers' dtype).
  const int e = mp_.mixed() ? 2 : 4, k = mp_.mixed() ? 12 : 8;
  const std::string es = std::to_string(e), ks = std::to_string(k);
  const std::string a2a_blocks = c.recompute == Recompute::kFull ? "6L_m" : "4L_m";
  std::vector<ReportRow> rows = {
      {"parameters", static_cast<double>(mt.current(MemCategory::kParameters)), e * psi,
       es + "(Ψ_d+Ψ_x)"},
      {"gradients", static_cast<double>(mt.current(MemCategory::kGradients)), e * psi,
       es + "(Ψ_d+Ψ_x)"},
      {"optimizer state", static_cast<double>(mt.current(MemCategory::kOptimizerState)), k * psi,
       ks + "(Ψ_d+Ψ_x)"},
      {"all_to_all/step", last_a2a_, moe_all_to_all_bytes(c, ep, last_G_, last_T_, e),
       a2a_blocks + "(ep-1)/ep·" + es + "EG·cap·C"},
      {"dense all_reduce/step", last_dense_, 2.0 * (W - 1) / W * e * n.dense,
       "2(W-1)/W·" + es + "Ψ_d"},
      {"expert all_reduce/step", last_expert_, 2.0 * (D - 1) / D * e * n.experts,
       "2(D-1)/D·" + es + "Ψ_x"},
  };
  // --recompute: what the walk of this rank's G sequences kept and ran again (a MoE block's forward
  // with its routing and both all_to_alls), as the baseline's walk of G sequences would.
  for (ReportRow& r : recompute_rows(c, GridShape{W, 1, 1}, W * last_G_, last_T_, e, last_meter_))
    rows.push_back(std::move(r));
  return rows;
}

void ExpertParallelStrategy::finish() {
  log_info("{}", routing_summary(last_routing_, model_.config(), last_T_));
}

}  // namespace llmp
