// PipelineStrategy (see pipeline_strategy.h): state layout, the step around the executor, and
// the end-of-training timeline (finish()).
#include "common/pipeline/pipeline_strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/optim/decay_mask.h"
#include "common/pipeline/span_gather.h"
#include "common/pipeline/timeline.h"
#include "common/pipeline/trace.h"
#include "common/plan/recompute_formulas.h"
#include "common/runtime/check.h"
#include "common/runtime/clock.h"

namespace llmp {
namespace {

constexpr size_t kMaxTraceSpans = 200000;  // about 20 MB of JSON; later steps are left out

/// The first thing that keeps `schedule` from running on `pp` with `model`, or "".
std::string check_setup(const GPT& model, const ProcessGroup& pp, const Schedule& schedule) {
  if (schedule.p != pp.size())
    return "the " + schedule.name + " schedule has p = " + std::to_string(schedule.p) +
           " pipeline stages but the pipeline group has " + std::to_string(pp.size()) + " ranks";
  const std::string err =
      GPTPartition::check(model.config().layers, schedule.p, schedule.v, schedule.pipelines);
  if (!err.empty()) return err;
  try {
    simulate(schedule);
  } catch (const ScheduleError& e) {
    return std::string("schedule ") + schedule.name + " rejected by the simulator: " + e.what();
  }
  return "";
}

}  // namespace

PipelineStrategy::PipelineStrategy(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                   uint64_t seed, Schedule schedule, std::string trace_path,
                                   LogicalCosts clock_costs, MixedPrecisionConfig mp,
                                   ProcessGroup* step_group)
    : MixedPrecisionStrategy(model, mp, step_group ? step_group : &pp,  // collective over it
                             GradClip(opt.clip_grad, step_group ? step_group : &pp)),
      model_(model),
      pp_(pp),
      schedule_(std::move(schedule)),
      trace_path_(std::move(trace_path)),
      metrics_(pp),
      clock_costs_(clock_costs),
      step_micro_batches_(schedule_.m) {
  const std::string err = check_setup(model, pp, schedule_);
  all_ranks_ok(err.empty(), err);  // one line from one rank, every rank exits 2
  const int r = pp.rank();
  part_ = std::make_unique<GPTPartition>(model.layout(), model.config().layers, schedule_.p,
                                         schedule_.v, schedule_.pipelines);
  sim_ = simulate(schedule_);  // unit costs: the bubble and in-flight figures of the papers
  const int64_t n = part_->local_numel(r);
  // --device cuda: the parameters, gradients and AdamW's m and v on the model's device; the walk
  // (unit_runner.h) then reads and accumulates there, and only messages cross (staged, p2p.h).
  // Mixed precision: 16-bit parameters, the fp32 gradient buffer the micro-batches accumulate in.
  const Device dev = model.device();
  params_ = Tensor::empty({n}, mp_.dtype(), MemCategory::kParameters, dev);
  grads_ = Tensor::zeros({n}, DType::kF32, MemCategory::kGradients, dev);
  {  // the whole model's decay ranges, segment by segment (the wte copy decays as wte does)
    const std::vector<ElementRange> whole = decay_ranges(model.layout(), opt.decay);
    std::vector<ElementRange> mine;
    for (const ParamSegment& s : part_->segments(r))
      for (const ElementRange& e : slice_ranges(whole, s.global_offset, s.numel, s.local_offset))
        mine.push_back(e);
    opt_ = std::make_unique<AdamW>(n, opt, std::move(mine), mp_.dtype(), dev);  // + master
  }
  {  // the same full initialisation on every rank (same seed), then keep this rank's segments:
     // on a device, 4Ψ_r bytes up once (the wte copy included; mixed: and 2Ψ_r)
    std::vector<float> full(model.layout().num_params());
    model.init_params(full.data(), seed);
    set_params(full.data());
  }
  exec_ = std::make_unique<PipelineExecutor>(model, *part_, pp, schedule_, clock_costs_);
  const std::vector<int> emb = part_->embedding_ranks();
  const bool two_pipelines = schedule_.pipelines == 2;
  in_emb_ = !two_pipelines && (r == emb.front() || r == emb.back());
  emb_ = pp.split(in_emb_ ? 0 : 1 + r, r);  // collective over pp; a 1-rank group off the ends
  if (two_pipelines) {  // Chimera: the pair {r, p-1-r} holding the same two stages
    const int p = pp.size();
    replicas_ = pp.split(std::min(r, p - 1 - r), r);  // collective over pp
  }
  book_ = pp.duplicate();                    // collective over pp: bookkeeping, not counted
}

bool PipelineStrategy::owns(const ParamSegment& s) const {
  return !s.wte_copy && (schedule_.pipelines != 2 || s.chunk == 0);
}

std::vector<Tensor> PipelineStrategy::owned_parts(const Tensor& grads) const {
  std::vector<Tensor> owned;
  for (const ParamSegment& s : part_->segments(pp_.rank()))
    if (owns(s)) owned.push_back(grads.narrow(s.local_offset, s.numel));
  return owned;
}

double PipelineStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                    int global_batch, int T, int64_t step) {
  const double bytes_before = pp_.stats().total_bytes() + emb_->stats().total_bytes() +
                              (replicas_ ? replicas_->stats().total_bytes() : 0.0);
  book_->barrier();  // 1. line the ranks up so that their spans share one time axis
  const double t0 = wall_seconds();

  // 2. The schedule: forwards and backwards of all micro-batches, gradients accumulated (fp32).
  //    fp16: every micro-batch's loss times S, the loss unscaled here, the gradients by AdamW.
  grads_.fill(0.0f);
  exec_->set_loss_multiplier(mp_.walk_loss_scale(1.0f, step));
  const double local_loss = mp_.unscale_loss(
      exec_->run(params_, grads_.f32(), tokens, targets, global_batch, T, t0), 1.0f, step);
  const double t_opt = wall_seconds();

  // 3. Tied embedding: wte's gradient = embedding part (first rank) + head part (last rank).
  all_reduce_tied_wte(grads_);
  // 3'. Chimera: each stage ran half the micro-batches on each of its two replicas.
  if (replicas_ && replicas_->size() > 1)
    replicas_->all_reduce(grads_, ReduceOp::kSum);  // sends 2(N-1)/N·4Ψ_r = 4Ψ_r, N = 2
  // 3''. --clip_grad: ‖g‖² = Σ over pp of the squares of each rank's OWNED gradient (owns():
  //     the wte copy's gradient, now equal to wte's, and Chimera's replicas count once), one
  //     all_reduce of 8 bytes; the coefficient goes into AdamW's gradient scale.
  // 4. AdamW on this rank's parameters (and, on the last rank, its copy of wte); mixed: on the
  //    master copy, rounded into the 16-bit parameters; fp16: skipped on every stage when one
  //    stage's owned gradient holds an inf or nan (agreed over pp).
  const std::vector<Tensor> owned = owned_parts(grads_);
  mp_.optimizer_step(*opt_, params_, grads_, step, -1, &clip_, &owned);

  std::vector<Span> spans = exec_->stats().spans;
  spans.push_back(Span{pp_.rank(), t_opt - t0, wall_seconds() - t0, "opt", "optimizer"});
  last_step_bytes_ = pp_.stats().total_bytes() + emb_->stats().total_bytes() +
                     (replicas_ ? replicas_->stats().total_bytes() : 0.0) - bytes_before;
  last_B_ = global_batch, last_T_ = T;

  // 5. Bookkeeping: the loss from the last stage, the spans to rank 0 (absolute time there).
  const double loss = metrics_.sum(local_loss);
  last_logical_ = gather_spans(*book_, exec_->stats().logical_spans, 0.0);
  record_wall_spans(spans, t0);
  return loss;
}

void PipelineStrategy::all_reduce_tied_wte(Tensor& grads) {
  if (!in_emb_ || emb_->size() < 2) return;
  const int64_t wte = part_->wte_local_offset(pp_.rank());
  Tensor g = grads.narrow(wte, model_.layout().find("wte.weight").numel);
  emb_->all_reduce(g, ReduceOp::kSum);  // sends 2(N-1)/N·4VC = 4VC bytes, N = 2
}

void PipelineStrategy::record_wall_spans(const std::vector<Span>& spans, double t0) {
  std::vector<Span> all = gather_spans(*book_, spans, t0);  // absolute times, rank by rank
  if (pp_.rank() != 0) return;
  last_spans_ = all;
  for (Span& s : last_spans_) s.start -= t0, s.end -= t0;
  if (first_t0_ < 0) first_t0_ = t0;
  for (Span& s : all) {
    if (trace_spans_.size() >= kMaxTraceSpans) break;
    s.start -= first_t0_, s.end -= first_t0_;
    trace_spans_.push_back(s);
  }
}

void PipelineStrategy::write_trace_if_asked() const {
  if (trace_path_.empty()) return;
  write_trace(trace_path_, trace_spans_, schedule_.p);
  std::printf("trace: %s (%zu spans; open in ui.perfetto.dev)\n", trace_path_.c_str(),
              trace_spans_.size());
}

double PipelineStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                   int global_batch, int T) {
  return metrics_.sum(exec_->forward_only(params_, tokens, targets, global_batch, T));
}

void PipelineStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // Mixed precision: the fp32 master copy is the full-precision state a checkpoint keeps.
  const Tensor& p = opt_->has_master_weights() ? opt_->master() : params_;
  gather_stages({{&p, params}, {&opt_->exp_avg(), exp_avg}, {&opt_->exp_avg_sq(), exp_avg_sq}});
}

void PipelineStrategy::gather_stages(
    std::initializer_list<std::pair<const Tensor*, float*>> states) {
  // Every rank contributes its own segments (not the wte copy, and for Chimera only its down
  // pipeline's stage: the up chunks are replicas); together they tile [0, Ψ).
  const int p = pp_.size();
  std::vector<int64_t> counts(p, 0);
  for (int q = 0; q < p; ++q)
    for (const ParamSegment& s : part_->segments(q))
      if (owns(s)) counts[q] += s.numel;
  const int64_t psi = model_.layout().num_params();
  // Host buffers: each owned segment comes down once (to_host: a memcpy on the CPU, 4 bytes per
  // owned element from a device), and the gather runs on the host, with nothing to stage.
  Tensor mine = Tensor::empty({counts[pp_.rank()]}, DType::kF32, MemCategory::kCommBuffers);
  Tensor all = Tensor::empty({psi}, DType::kF32, MemCategory::kCommBuffers);
  for (auto [src, dst] : states) {
    int64_t at = 0;
    for (const ParamSegment& s : part_->segments(pp_.rank()))
      if (owns(s)) to_host(mine.f32() + at, src->narrow(s.local_offset, s.numel)), at += s.numel;
    pp_.all_gather_v(mine, all, counts);
    at = 0;
    for (int q = 0; q < p; ++q)
      for (const ParamSegment& s : part_->segments(q))
        if (owns(s))
          std::memcpy(dst + s.global_offset, all.f32() + at, s.numel * sizeof(float)),
              at += s.numel;
  }
}

void PipelineStrategy::set_state(const float* params, const float* exp_avg,
                                 const float* exp_avg_sq) {
  set_params(params);
  scatter_stages({{exp_avg, &opt_->exp_avg()}, {exp_avg_sq, &opt_->exp_avg_sq()}});
}

void PipelineStrategy::set_params(const float* full) {
  if (!opt_->has_master_weights()) return scatter_stages({{full, &params_}});
  scatter_stages({{full, &opt_->master()}});
  for (const ParamSegment& s : part_->segments(pp_.rank()))  // the 16-bit working copy
    round_from_host(params_.narrow(s.local_offset, s.numel), full + s.global_offset);
}

void PipelineStrategy::scatter_stages(
    std::initializer_list<std::pair<const float*, const Tensor*>> states) const {
  // from_host: a memcpy on the CPU, 4 bytes per local element up to a device.
  for (auto [full, local] : states)
    for (const ParamSegment& s : part_->segments(pp_.rank()))  // the wte copy included
      from_host(local->narrow(s.local_offset, s.numel), full + s.global_offset);
}

double PipelineStrategy::measured_bubble_fraction() const {
  // Over the schedule's actions only, as the simulator counts (the optimizer span is left out).
  std::vector<Span> spans;
  for (const Span& s : last_spans_)
    if (s.category != "optimizer") spans.push_back(s);
  return spans.empty() ? 0.0 : bubble_fraction(spans, schedule_.p);
}

double PipelineStrategy::executed_bubble_fraction() const {
  return last_logical_.empty() ? 0.0 : bubble_fraction(last_logical_, schedule_.p);
}

double PipelineStrategy::executed_makespan() const {
  double t = 0;
  for (const Span& s : last_logical_) t = std::max(t, s.end);  // every rank starts at 0
  return t;
}

double PipelineStrategy::expected_bytes_per_step(int global_batch, int T) const {
  const std::vector<Action>& list = schedule_.ranks.at(pp_.rank());
  const double n = static_cast<double>(part_->local_numel(pp_.rank()));
  const double rep = (replicas_ && replicas_->size() > 1) ? 4.0 * n : 0.0;  // 2(N-1)/N·4Ψ_r
  return sent_bytes(list.begin(), list.end(), /*wte_all_reduces=*/1, global_batch, T) + rep;
}

double PipelineStrategy::sent_bytes(std::vector<Action>::const_iterator begin,
                                    std::vector<Action>::const_iterator end, int wte_all_reduces,
                                    int global_batch, int T) const {
  const GPTConfig& c = model_.config();
  int sends = 0;
  for (auto a = begin; a != end; ++a) sends += a->op == Op::kSendForward || a->op == Op::kSendBackward;
  const double e = static_cast<double>(dtype_size(model_.activation_dtype()));
  const double act = e * (global_batch / step_micro_batches_) * T * c.d;  // e·b·T·C
  const double emb = (in_emb_ && emb_->size() > 1) ? 4.0 * c.padded_vocab() * c.d : 0.0;
  return sends * act + wte_all_reduces * emb;
}

double PipelineStrategy::expected_activation_bytes(int global_batch, int T) const {
  const GPTConfig& c = model_.config();
  const int64_t b = global_batch / step_micro_batches_, k = part_->blocks_per_stage();
  // k blocks of what each keeps under the recomputation policy (recompute_formulas.h); with
  // none 4bT(16C + HT + 4) each.
  RecomputeDims dims{b, T, c.d, c.heads, k};
  dims.flash = c.attention == AttentionMethod::kFlash;  // lse kept, not P
  const int e = static_cast<int>(dtype_size(model_.activation_dtype()));
  return static_cast<double>(k) * activation_bytes_per_block(dims, c.recompute, c.recompute_every, e);
}

std::vector<ReportRow> PipelineStrategy::report() const {
  const MemoryTracker& mt = MemoryTracker::instance();
  const double n = static_cast<double>(part_->local_numel(pp_.rank()));
  const char* k_text = replicas_ ? "k=L/p" : "k=L/(pv)";
  // Mixed precision: 2-byte parameters and activations, fp32 gradients (the micro-batches'
  // accumulator), AdamW's master copy with m and v (12 bytes per parameter).
  const bool mixed = mp_.mixed();
  const int e = static_cast<int>(dtype_size(model_.activation_dtype()));
  const std::string p_text = mixed ? "2Ψ_r" : "4Ψ_r";
  const Recompute policy = model_.config().recompute;
  const bool flash = model_.config().attention == AttentionMethod::kFlash;
  std::string act_text;
  if (policy == Recompute::kNone && e == 4)
    act_text = flash ? "4bTk(16C+H+4), "  // flash: lse (H per token), not P
                     : "4bTk(16C+HT+4), ";
  else if (policy == Recompute::kNone)
    act_text = flash ? "bTk(32C+4H+16), " : "bTk(32C+2HT+16), ";
  else
    act_text = std::string("k·(") +
               activation_formula_text(policy, model_.config().recompute_every, e, flash) + "), ";
  const std::string e_text = std::to_string(e);
  std::vector<ReportRow> rows = {
      {"parameters", double(mt.current(MemCategory::kParameters)), (mixed ? 2 : 4) * n,
       p_text + (replicas_ ? " (two stages, one per pipeline)" : " (own units+wte copy)")},
      {"gradients", double(mt.current(MemCategory::kGradients)), 4 * n,
       mixed ? "4Ψ_r (fp32: m micro-batches add)" : "4Ψ_r"},
      {"optimizer state", double(mt.current(MemCategory::kOptimizerState)), (mixed ? 12 : 8) * n,
       mixed ? "12Ψ_r (master, m, v)" : "8Ψ_r"},
      {"activations per micro-batch", double(exec_->stats().stored_per_forward),
       expected_activation_bytes(last_B_, last_T_), act_text + k_text},
      {"sent per step", last_step_bytes_, expected_bytes_per_step(last_B_, last_T_),
       replicas_ ? "sends·" + e_text + "bTC + 4Ψ_r (replica all_reduce)"
                 : "sends·" + e_text + "bTC + 4VC (wte ranks)"}};
  return rows;
}

void PipelineStrategy::finish() {
  if (pp_.rank() != 0 || last_spans_.empty()) return;  // rank 0 holds the gathered spans
  const ExecutorStats& st = exec_->stats();
  const std::string name = schedule_.name + " p=" + std::to_string(schedule_.p) +
                           " m=" + std::to_string(schedule_.m) + " v=" +
                           std::to_string(schedule_.v);
  // The headline: the step as executed, on the logical clock (3 characters per unit, F = 1).
  const double T = executed_makespan();
  char costs_buf[96];
  bool split = false;  // zero bubble's B and W: say what they cost
  for (const auto& list : schedule_.ranks)
    for (const Action& a : list) split = split || a.op == Op::kBackwardWeight;
  if (split)
    std::snprintf(costs_buf, sizeof(costs_buf), "F = %g, B = W = %g", clock_costs_.forward,
                  clock_costs_.backward_input);
  else
    std::snprintf(costs_buf, sizeof(costs_buf), "F = %g, B = %g", clock_costs_.forward,
                  clock_costs_.backward);
  const std::string costs_text = costs_buf;
  const int width = std::clamp(static_cast<int>(std::lround(3 * T)), 1, 480);
  char unit[64];
  std::snprintf(unit, sizeof(unit), "1 unit = %.3g characters", width / std::max(T, 1.0));
  std::printf("\n%s", render_spans(last_logical_, schedule_.p, width,
                                   name + ", last step as EXECUTED: logical clock over the real "
                                          "messages (" + costs_text + "; " +
                                          unit + ")",
                                   "executed bubble fraction")
                          .c_str());
  std::printf("executed makespan %g units", T);
  if (formula_bubble_ >= 0)
    std::printf("; the paper's bubble fraction %s = %.4f", formula_text_.c_str(), formula_bubble_);
  std::printf("\n");
  // The same step on the wall clock: ranks outnumber cores here, so idle time is not a bubble.
  std::printf("\n%s\n", render_spans(last_spans_, schedule_.p, 160,
                                     name + ", last step on the WALL CLOCK (rank 0 clock; ranks "
                                            "share cores: timing, not the schedule's bubble)",
                                     "wall-clock idle fraction (not the bubble)")
                            .c_str());
  std::printf("rank 0 activations: peak %s (MemoryTracker), %d micro-batch·chunks in flight "
              "(simulated %d) × %s stored per forward\n",
              format_bytes(double(st.peak_activation_bytes)).c_str(), st.peak_in_flight,
              sim_.peak_in_flight.at(0), format_bytes(double(st.stored_per_forward)).c_str());
  write_trace_if_asked();
  std::fflush(stdout);
}

}  // namespace llmp
