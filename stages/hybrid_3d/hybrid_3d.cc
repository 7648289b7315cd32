// HybridStrategy (see hybrid_3d.h): the pipeline strategy over a tensor-parallel model, with
// ZeRO-1 over the data-parallel group.
#include "stages/hybrid_3d/hybrid_3d.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "common/optim/decay_mask.h"
#include "common/pipeline/span_gather.h"
#include "common/runtime/check.h"
#include "common/runtime/clock.h"
#include "common/tensor/memory.h"
#include "common/tp/tp_strategy.h"

namespace llmp {
namespace {

/// The schedule of `o` for p stages: 1F1B, or interleaved 1F1B with v > 1 chunks. Fails on every
/// rank with make_schedule's or hybrid_rank_plan's one line (exit 2) when (p, m, v) or the grid
/// do not fit the model.
Schedule checked_schedule(const GPTConfig& cfg, const ProcessGrid& grid, const HybridOptions& o) {
  std::string err;
  Schedule s;
  try {
    const TpModelDims d{cfg.padded_vocab(), cfg.ctx, cfg.layers, cfg.d, cfg.heads};
    hybrid_rank_plan(d, {grid.dp(), grid.pp(), grid.tp(), o.micro_batches, o.chunks,
                         o.sequence_parallel},
                     0, int64_t(grid.dp()) * o.micro_batches, cfg.ctx);
    s = make_schedule(o.chunks > 1 ? "interleaved_1f1b" : "1f1b", grid.pp(), o.micro_batches,
                      o.chunks);
  } catch (const std::invalid_argument& e) {
    err = e.what();
  }
  all_ranks_ok(err.empty(), err);
  return s;
}

/// Collective calls made on `g` so far (CommStats counts each call, bytes or not).
int64_t calls_made(const ProcessGroup& g) {
  int64_t n = 0;
  for (const auto& kv : g.stats().calls) n += kv.second;
  return n;
}

}  // namespace

HybridStrategy::HybridStrategy(const GPTConfig& cfg, ProcessGrid& grid, AdamWConfig opt,
                               uint64_t seed, HybridOptions o)
    : TpModel(cfg, grid.tp_group(), o.sequence_parallel, o.device,
              storage_dtype(o.mp.precision)),
      // fp16's skip and --clip_grad's norm over the world: each rank owns a part of the gradient
      // (a stage's slice's shard), every grid dimension splitting it.
      PipelineStrategy(*slice, grid.pp_group(), opt, seed, checked_schedule(cfg, grid, o),
                       o.trace_path, LogicalCosts{}, o.mp, &grid.world()),
      grid_(grid),
      shape_{grid.dp(), grid.pp(), grid.tp(), o.micro_batches, o.chunks, o.sequence_parallel,
             o.zero},
      shards_(part_->local_numel(grid.pp_rank()), grid.dp()),
      dp_metrics_(grid.dp_group()) {
  // ZeRO-1: the optimizer state for this rank's shard of its Ψ_r parameters only. The decay
  // ranges of the whole slice, segment by segment (as PipelineStrategy's), cut to the shard.
  const int r = pp_.rank(), d = grid.dp_rank();
  std::vector<ElementRange> local;
  const std::vector<ElementRange> whole = decay_ranges(model_.layout(), opt.decay);
  for (const ParamSegment& s : part_->segments(r))
    for (const ElementRange& e : slice_ranges(whole, s.global_offset, s.numel, s.local_offset))
      local.push_back(e);
  // PipelineStrategy's full-size state, replaced by the shard's: m, v (and under mixed precision
  // the fp32 master copy, taken from the whole one's) beside the parameters.
  std::unique_ptr<AdamW> full_size = std::move(opt_);
  opt_ = std::make_unique<AdamW>(shards_.padded, opt,
                                 slice_ranges(local, shards_.begin[d], shards_.count[d]),
                                 mp_.dtype(), model_.device());
  if (opt_->has_master_weights())
    opt_->master().narrow(0, shards_.count[d])
        .copy_from(full_size->master().narrow(shards_.begin[d], shards_.count[d]));
  full_size.reset();
  // One walk over this rank's segments and the tensors in them:
  // - where the replicated tensors (wpe, LayerNorms, row-parallel biases) lie in the local
  //   buffer (repl_): under sequence parallelism each rank computes their gradients from its own
  //   rows only;
  // - --clip_grad: the elements this rank counts in ‖g‖, summed over the world: the pipeline's
  //   owned segments (not the wte copy), the replicated tensors on tp rank 0 only; the step then
  //   takes the part of them in its ZeRO shard.
  for (const ParamSegment& s : part_->segments(r)) {
    for (const ParamSpec& p : model_.layout().params()) {
      const int64_t a = std::max(p.offset, s.global_offset);
      const int64_t b = std::min(p.offset + p.numel, s.global_offset + s.numel);
      if (a >= b) continue;
      const int64_t at = s.local_offset + (a - s.global_offset);
      const bool replicated = p.split == Split::kReplicated;
      // wte is split by rows, never replicated under t > 1: its copy holds no replicated part.
      if (replicated && !s.wte_copy) repl_.push_back({at, b - a});
      if (owns(s) && (!replicated || grid.tp_rank() == 0)) clip_owned_.add(at, b - a);
    }
  }
  if (o.zero == 2) {  // the whole gradient never exists: a shard of it for the step
    grads_ = Tensor();
    grad_shard_ = Tensor::zeros({shards_.padded}, DType::kF32, MemCategory::kGradients,
                                model_.device());
  }
}

BatchSlice HybridStrategy::batch_slice(int global_batch) const {
  const int n = global_batch / shape_.dp;
  return {grid_.dp_rank() * n, n};
}

void HybridStrategy::all_reduce_replicated_grads() {
  all_reduce_packed(*grad_group, grads_, repl_);  // sends 2(t-1)/t·4·Ψ_repl,r
}

void HybridStrategy::zero1_step(int64_t step) {
  ProcessGroup& dp = grid_.dp_group();
  const int d = dp.rank();
  const int64_t begin = shards_.begin[d], count = shards_.count[d];
  if (dp.size() == 1) return shard_step(grads_, step);  // one replica: its shard is everything
  // reduce_scatter: this rank receives Σ_replicas grads[begin, begin + count). (dp-1)/dp·4Ψ_r
  // (fp32 gradients in every precision)
  Tensor shard = Tensor::empty({count}, DType::kF32, MemCategory::kCommBuffers, grads_.device());
  dp.reduce_scatter_v(grads_, shard, shards_.count, ReduceOp::kSum);
  shard_step(shard, step);  // AdamW on the shard only
  shard = Tensor();
  // all_gather: every replica again holds all Ψ_r parameters. (dp-1)/dp·p_b·Ψ_r (p_b = 2 in
  // bf16/fp16: the rounded parameters, as Megatron-LM's distributed optimizer gathers them)
  dp.all_gather_v(params_.narrow(begin, count), params_, shards_.count);
}

void HybridStrategy::shard_step(const Tensor& shard, int64_t step) {
  const int d = grid_.dp_rank();
  const int64_t begin = shards_.begin[d], count = shards_.count[d];
  // The owned elements in the shard's valid part: --clip_grad's ‖g‖² (8 bytes over the world)
  // and fp16's overflow check (agreed over the world: every rank skips the same step).
  const std::vector<Tensor> owned = clip_owned_.views(shard.narrow(0, count), begin);
  mp_.optimizer_step(*opt_, params_.narrow(begin, count), shard, step, count, &clip_, &owned);
}

HybridPrecision HybridStrategy::bytes() const {
  // Mixed: 16-bit parameters and activations, fp32 gradients, the master copy with m and v.
  return mp_.mixed() ? HybridPrecision::mixed() : HybridPrecision::fp32();
}

double HybridStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                  int global_batch, int T, int64_t step) {
  ProcessGroup &tp = grid_.tp_group(), &dp = grid_.dp_group();
  const double tp0 = tp.stats().total_bytes(), rg0 = regather_group->stats().total_bytes(),
               rp0 = grad_group->stats().total_bytes(), pp0 = pp_.stats().total_bytes(),
               emb0 = emb_->stats().total_bytes(), dp0 = dp.stats().total_bytes();
  book_->barrier();  // line the pipeline's ranks up so that their spans share one time axis
  const double t0 = wall_seconds();

  const int64_t calls0 = calls_made(dp);
  double walk_loss = 0, t_opt = 0;
  // fp16: every micro-batch's loss times S (the gradients unscaled by AdamW, the loss below).
  exec_->set_loss_multiplier(mp_.walk_loss_scale(1.0f, step));
  if (shape_.zero == 2) {  // 1-3 with the accumulation on the shards, then 4
    walk_loss = zero2_backward(tokens, targets, global_batch, T, t0, &t_opt);
    zero2_step(step);
  } else {
    // 1. The schedule over this replica's B/dp sequences; losses scaled by 1/(B·T), B global.
    grads_.fill(0.0f);
    exec_->set_loss_batch(global_batch);
    walk_loss = exec_->run(params_, grads_.f32(), tokens, targets,
                           global_batch / shape_.dp, T, t0);
    t_opt = wall_seconds();
    all_reduce_tied_wte(grads_);                   // 2. over {first stage, last stage}
    if (shape_.sp) all_reduce_replicated_grads();  // 3. over tp
    zero1_step(step);                              // 4. over dp
  }
  const double local_loss = mp_.unscale_loss(walk_loss, 1.0f, step);

  const MemoryTracker& mt = MemoryTracker::instance();
  measured_.params = double(mt.current(MemCategory::kParameters));
  measured_.grads = double(mt.current(MemCategory::kGradients));
  measured_.grads_peak = double(mt.peak(MemCategory::kGradients));  // since the executor's run
  measured_.dp_calls = calls_made(dp) - calls0;
  measured_.optimizer = double(mt.current(MemCategory::kOptimizerState));
  measured_.activations_per_microbatch = double(exec_->stats().stored_per_forward);
  measured_.tp = tp.stats().total_bytes() - tp0;
  measured_.regather = regather_group->stats().total_bytes() - rg0;
  measured_.repl_grads = grad_group->stats().total_bytes() - rp0;
  measured_.pp = pp_.stats().total_bytes() - pp0;
  measured_.emb = emb_->stats().total_bytes() - emb0;
  measured_.dp = dp.stats().total_bytes() - dp0;
  last_step_bytes_ = measured_.pp + measured_.emb;
  last_B_ = global_batch / shape_.dp, last_T_ = T, last_global_B_ = global_batch;

  // 5. The loss: the last stage's, over pp; the replicas' parts, over dp (bookkeeping groups).
  const double loss = dp_metrics_.sum(metrics_.sum(local_loss));
  std::vector<Span> spans = exec_->stats().spans;
  spans.push_back(Span{pp_.rank(), t_opt - t0, wall_seconds() - t0, "opt", "optimizer"});
  last_logical_ = gather_spans(*book_, exec_->stats().logical_spans, 0.0);
  record_wall_spans(spans, t0);
  return loss;
}

double HybridStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                 int global_batch, int T) {
  exec_->set_loss_batch(global_batch);  // each replica's part of the global mean
  const double local = exec_->forward_only(params_, tokens, targets,
                                           global_batch / shape_.dp, T);
  return dp_metrics_.sum(metrics_.sum(local));
}

void HybridStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // dp: every replica's optimizer shard into whole local buffers (Ψ_r floats).
  ProcessGroup& dp = grid_.dp_group();
  const int64_t n = part_->local_numel(pp_.rank());
  // On the state's device (a gather of device shards into a device buffer); gather_stages brings
  // each owned segment down once (to_host).
  Tensor m = Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers, params_.device());
  Tensor v = Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers, params_.device());
  const int d = dp.rank();
  dp.all_gather_v(opt_->exp_avg().narrow(0, shards_.count[d]), m, shards_.count);
  dp.all_gather_v(opt_->exp_avg_sq().narrow(0, shards_.count[d]), v, shards_.count);
  // Mixed precision: the full-precision parameters are the fp32 master shards, gathered too.
  Tensor master;
  if (opt_->has_master_weights()) {
    master = Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers, params_.device());
    dp.all_gather_v(opt_->master().narrow(0, shards_.count[d]), master, shards_.count);
  }
  // pp: the stages into this tp rank's slice of the model; tp: the slices into the whole model.
  const int64_t slice = model_.layout().num_params();
  std::vector<float> sp(slice), sm(slice), sv(slice);
  gather_stages({{master.defined() ? &master : &params_, sp.data()}, {&m, sm.data()},
                 {&v, sv.data()}});
  ProcessGroup& tp = grid_.tp_group();
  tp_slices_to_full(tp, model_.config(), sp.data(), params);
  tp_slices_to_full(tp, model_.config(), sm.data(), exp_avg);
  tp_slices_to_full(tp, model_.config(), sv.data(), exp_avg_sq);
}

void HybridStrategy::set_state(const float* params, const float* exp_avg,
                               const float* exp_avg_sq) {
  const int64_t slice = model_.layout().num_params(), n = part_->local_numel(pp_.rank());
  std::vector<float> sp(slice), sm(slice), sv(slice);
  // m and v of the local buffer on the host: only this rank's shard of them goes up (from_host).
  // Mixed precision: the parameters too (lp), rounded into the 16-bit working copy, and this
  // rank's shard of them is its master copy.
  const bool mixed = opt_->has_master_weights();
  const Tensor lm = Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers);
  const Tensor lv = Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers);
  const Tensor lp = mixed ? Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers) : params_;
  model_.layout().copy_from_full(params, sp.data());  // the whole model -> this tp slice
  model_.layout().copy_from_full(exp_avg, sm.data());
  model_.layout().copy_from_full(exp_avg_sq, sv.data());
  scatter_stages({{sp.data(), &lp}, {sm.data(), &lm}, {sv.data(), &lv}});
  const int d = grid_.dp_rank();  // this rank's shard of m and v: 4·count bytes up each
  const int64_t begin = shards_.begin[d], count = shards_.count[d];
  from_host(opt_->exp_avg().narrow(0, count), lm.f32() + begin);
  from_host(opt_->exp_avg_sq().narrow(0, count), lv.f32() + begin);
  if (mixed) {
    round_from_host(params_, lp.f32());  // 2 bytes per element up from a host
    from_host(opt_->master().narrow(0, count), lp.f32() + begin);
  }
}

void HybridStrategy::finish() {
  // One pipeline's timeline (dp_rank 0, tp_rank 0: world rank 0): every pipeline runs the same
  // schedule, and the tp ranks of a stage run it in lock step.
  if (grid_.world().rank() == 0) {
    std::printf("\nthe pipeline of dp_rank 0, tp_rank 0 (world ranks");
    for (int r = 0; r < shape_.pp; ++r)
      std::printf(" %d", ProcessGrid::world_rank_of(0, r, 0, shape_.pp, shape_.tp));
    std::printf("); the other %d pipelines run the same schedule\n", shape_.dp * shape_.tp - 1);
  }
  if (grid_.dp_rank() == 0 && grid_.tp_rank() == 0) PipelineStrategy::finish();
}

StagingStats HybridStrategy::staging_stats() const {
  StagingStats sum;
  for (const ProcessGroup* g : {&grid_.tp_group(), regather_group.get(), grad_group.get(), &pp_,
                                emb_.get(), &grid_.dp_group()}) {
    sum.to_host_bytes += g->staging_stats().to_host_bytes;
    sum.to_device_bytes += g->staging_stats().to_device_bytes;
  }
  return sum;
}

HybridRankPlan HybridStrategy::expected() const {
  const GPTConfig& c = model_.config();
  HybridShape s = shape_;
  s.recompute = c.recompute, s.recompute_every = c.recompute_every;
  s.flash = c.attention == AttentionMethod::kFlash;
  return hybrid_rank_plan({c.padded_vocab(), c.ctx, c.layers, c.d, c.heads}, s, pp_.rank(),
                          last_global_B_, last_T_, bytes());
}

std::vector<ReportRow> HybridStrategy::report() const {
  const HybridRankPlan e = expected();
  const HybridMeasured& m = measured_;
  const bool sp = shape_.sp, t1 = shape_.tp > 1, mixed = mp_.mixed();
  // The activations' bytes per element in the formulas' text: 4, or 2 in bf16/fp16.
  const std::string a = std::to_string(int(bytes().act));
  std::vector<ReportRow> rows = {
      {"parameters", m.params, e.params, mixed ? "2Ψ_r" : "4Ψ_r"},
      {"gradients", m.grads, e.grads, mixed ? "4Ψ_r (fp32: m micro-batches add)" : "4Ψ_r"},
      {"optimizer state", m.optimizer, e.optimizer,
       mixed ? "12⌈Ψ_r/dp⌉ (master, m, v)" : "8⌈Ψ_r/dp⌉"},
      {"activations per micro-batch", m.activations_per_microbatch,
       e.activations_per_microbatch,
       sp ? "k·act_block(t, SP)" : "k·act_block(t)"},
      {"sent per step (tp group)", m.tp, e.tp,
       "m·Σ_c(4k+e+h)·2(t-1)/t·" + a + "bTC+…"}};
  if (sp && t1) {
    rows.push_back({"sent per step (tp re-gather)", m.regather, e.regather,
                    "2mvk(t-1)/t·" + a + "bTC"});
    rows.push_back({"sent per step (tp repl. grads)", m.repl_grads, e.repl_grads,
                    "2(t-1)/t·4Ψ_repl,r"});
  }
  rows.push_back({"sent per step (pp group)", m.pp, e.pp,
                  "sends·" + a + "bTC" + (sp ? "/t" : "")});
  // The same rows on every rank (the table is gathered row by row): 0 off the two end stages.
  if (shape_.pp > 1) rows.push_back({"sent per step (wte pair)", m.emb, e.emb, "4VC/t, end stages"});
  rows.push_back({"sent per step (dp group)", m.dp, e.dp,
                  mixed ? "(dp-1)/dp·(4+2)Ψ_r" : "2(dp-1)/dp·4Ψ_r"});
  if (shape_.zero == 2) zero2_rows(&rows);
  return rows;
}

}  // namespace llmp
