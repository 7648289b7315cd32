// PipeDream-2BW's segments, weight versions and update rule (see pipedream_2bw.h).
#include "stages/pipedream_2bw/pipedream_2bw.h"

#include <algorithm>
#include <cstdio>

#include "common/pipeline/schedule.h"
#include "common/pipeline/span_gather.h"
#include "common/pipeline/timeline.h"
#include "common/runtime/check.h"
#include "common/runtime/clock.h"

namespace llmp {

std::string pipedream_2bw_check(int p, int m) {
  if (m >= p) return "";
  return "pipedream_2bw needs m >= p micro-batches (a rank finishes batch t-1 before batch t+1 "
         "starts): m=" + std::to_string(m) + ", p=" + std::to_string(p);
}

std::string pipedream_2bw_precision_check(TrainPrecision p) {
  if (p != TrainPrecision::kFP16) return "";
  return "pipedream_2bw trains in fp32 or bf16, not fp16: a batch's backwards run in two "
         "segments, and fp16's loss scale may change between them (use --precision bf16)";
}

namespace {
/// The precision, checked on every rank before any member is built (one line, exit 2).
MixedPrecisionConfig checked(MixedPrecisionConfig mp) {
  const std::string err = pipedream_2bw_precision_check(mp.precision);
  all_ranks_ok(err.empty(), err);
  return mp;
}
}  // namespace

PipeDream2BWStrategy::PipeDream2BWStrategy(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                           uint64_t seed, int m, int64_t steps,
                                           std::string trace_path, MixedPrecisionConfig mp)
    // The stream: ONE 1F1B schedule over every micro-batch of the run (steps·m of them).
    : PipelineStrategy(model, pp, opt, seed,
                       one_f_one_b(pp.size(), static_cast<int>(std::max<int64_t>(steps, 1)) * m),
                       std::move(trace_path), LogicalCosts{}, checked(mp)),
      m_(m),
      steps_(std::max<int64_t>(steps, 1)) {
  const std::string err = pipedream_2bw_check(pp.size(), m);
  all_ranks_ok(err.empty(), err);
  step_micro_batches_ = m;
  // Beside params_ and grads_ (on the model's device with --device cuda): the copies between
  // the versions are device-to-device (copy_from), nothing crosses to the host. In params_'s
  // dtype: the older version is the 16-bit W(t-1) its micro-batches' forwards read.
  older_ = Tensor::empty(params_.shape(), params_.dtype(), MemCategory::kParameters,
                         params_.device());
  older_.copy_from(params_);  // W(-1) = W(0)
  grads2_ = Tensor::zeros(grads_.shape(), DType::kF32, MemCategory::kGradients, grads_.device());
  cut_segments();
}

void PipeDream2BWStrategy::cut_segments() {
  const int r = pp_.rank(), w = pp_.size() - r - 1;  // 1F1B warm-up of rank r
  const std::vector<Action>& list = schedule_.ranks.at(r);
  // A forward (and its recv/send) belongs to its batch's segment; the backward of micro-batch
  // i follows the forward of i+w in the steady state, so it belongs to that forward's segment,
  // or to the drain when i+w is past the run.
  cut_.assign(static_cast<size_t>(steps_) + 1, list.size());
  int64_t prev = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    const bool fwd = a.op == Op::kRecvForward || a.op == Op::kForward || a.op == Op::kSendForward;
    const int64_t seg = fwd ? a.microbatch / m_ : std::min<int64_t>((a.microbatch + w) / m_, steps_);
    LLMP_CHECK(seg >= prev, "stream segments out of order at " + to_string(a));
    for (int64_t t = prev + 1; t <= seg; ++t) cut_[t] = i;
    if (seg > prev) prev = seg;
  }
  cut_[0] = 0;
}

double PipeDream2BWStrategy::run(size_t begin, size_t end, int B, int T, double t0) {
  PipelineExecutor::StreamBatches io;
  // Batch `current_` reads the newest version (params_), the batch before it the older one.
  io.params = [this](int batch) -> const Tensor& {
    return batch == current_ ? params_ : older_;
  };
  io.grads = [this](int batch) { return batch % 2 ? grads2_.f32() : grads_.f32(); };
  io.tokens = [this](int batch) { return tokens_[batch % 2].data(); };
  io.targets = [this](int batch) { return targets_[batch % 2].data(); };
  return exec_->run_segment(schedule_.ranks.at(pp_.rank()), begin, end, m_, B, T, io, t0);
}

void PipeDream2BWStrategy::apply_update(int batch) {
  Tensor& g = batch % 2 ? grads2_ : grads_;
  all_reduce_tied_wte(g);  // the tied wte: embedding part + head part
  // W(batch+1) = AdamW(W(batch), g(batch)): the newest version becomes the older one. --clip_grad:
  // ‖g(batch)‖ over pp from each rank's owned segments (wte's copy counted once), as
  // PipelineStrategy::train_step takes it; every rank comes here once per batch, in order. bf16:
  // AdamW updates the master copy and rounds it into params_.
  older_.copy_from(params_);
  const std::vector<Tensor> owned = owned_parts(g);
  mp_.optimizer_step(*opt_, params_, g, step_of_.at(batch), -1, &clip_, &owned);
  g.fill(0.0f);
}

double PipeDream2BWStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                        int global_batch, int T, int64_t step) {
  const int t = next_;
  LLMP_CHECK(t < steps_, "pipedream_2bw: step " + std::to_string(t + 1) + " past the " +
                             std::to_string(steps_) + " steps the stream was built for");
  ++next_;
  const size_t n = static_cast<size_t>(global_batch) * T;
  tokens_[t % 2].assign(tokens, tokens + n);
  targets_[t % 2].assign(targets, targets + n);
  step_of_.push_back(step);
  const double bytes_before = pp_.stats().total_bytes() + emb_->stats().total_bytes();
  const double t0 = wall_seconds();

  // Segment t: batch t's forwards (with W(t-1)), batch t-1's last backwards (W(t-2)), batch
  // t's first backwards.
  current_ = t;
  const double local_loss = run(cut_[t], cut_[t + 1], global_batch, T, t0);
  std::vector<Span> spans = exec_->stats().spans;
  const std::vector<Span> logical = exec_->stats().logical_spans;
  // g(t-1) is complete on every rank: W(t) = AdamW(W(t-1), g(t-1)). From now on batch t reads
  // the older version, W(t-1), and batch t+1 the newest, W(t).
  if (t >= 1) apply_update(t - 1);
  current_ = t + 1;
  if (t == steps_ - 1) {  // the end of the run: drain batch t's last backwards, then W(t+1)
    run(cut_[steps_], schedule_.ranks.at(pp_.rank()).size(), global_batch, T, t0);
    apply_update(t);
    exec_->finish_stream();
  }
  last_step_bytes_ = pp_.stats().total_bytes() + emb_->stats().total_bytes() - bytes_before;
  last_B_ = global_batch, last_T_ = T;
  last_begin_ = cut_[t];
  last_end_ = t == steps_ - 1 ? schedule_.ranks.at(pp_.rank()).size() : cut_[t + 1];
  last_updates_ = (t >= 1) + (t == steps_ - 1);

  // Bookkeeping: the loss from the last stage; the segment's spans to rank 0.
  const double loss = metrics_.sum(local_loss);
  std::vector<Span> all = gather_spans(*book_, logical, 0.0);
  record_wall_spans(spans, t0);  // each rank's own t0: no barrier lines the ranks up
  if (pp_.rank() == 0) {
    const int p = pp_.size();
    segment_idle_.assign(p, 0.0);
    std::vector<double> end_of(p, 0.0), busy(p, 0.0);
    double first = all.empty() ? 0.0 : all.front().start;
    for (const Span& s : all) {
      end_of[s.rank] = std::max(end_of[s.rank], s.end);
      if (s.category == "forward" || s.category == "backward") busy[s.rank] += s.end - s.start;
      first = std::min(first, s.start);
    }
    prev_end_.resize(p, 0.0);
    for (int q = 0; q < p; ++q) {
      segment_idle_[q] = (end_of[q] - prev_end_[q]) - busy[q];
      prev_end_[q] = end_of[q];
    }
    for (Span& s : all) s.start -= first, s.end -= first;
    last_logical_ = all;
    if (t >= 1 && t <= steps_ - 2) steady_idle_ = segment_idle_, steady_logical_ = all;
  }
  return loss;
}

void PipeDream2BWStrategy::set_state(const float* params, const float* exp_avg,
                                     const float* exp_avg_sq) {
  PipelineStrategy::set_state(params, exp_avg, exp_avg_sq);
  older_.copy_from(params_);
}

double PipeDream2BWStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                       int global_batch, int T) {
  return metrics_.sum(exec_->forward_only(params_, tokens, targets, global_batch, T, m_));
}

int64_t PipeDream2BWStrategy::weight_version_bytes() const {
  return static_cast<int64_t>(dtype_size(params_.dtype())) * (params_.numel() + older_.numel());
}

std::vector<ReportRow> PipeDream2BWStrategy::report() const {
  std::vector<ReportRow> rows = PipelineStrategy::report();
  const double n = static_cast<double>(part_->local_numel(pp_.rank()));
  const double pb = static_cast<double>(dtype_size(params_.dtype()));  // 4, or 2 in bf16
  const int e = static_cast<int>(dtype_size(model_.activation_dtype()));
  const std::vector<Action>& list = schedule_.ranks.at(pp_.rank());
  for (ReportRow& row : rows) {
    if (row.what == "parameters")
      row.formula = 2 * pb * n, row.formula_text = pb == 4 ? "2·4Ψ_r (two weight versions)"
                                                            : "2·2Ψ_r (two weight versions)";
    if (row.what == "gradients") row.formula = 8 * n, row.formula_text = "2·4Ψ_r (two gradient buffers)";
    if (row.what == "sent per step") {
      row.formula = sent_bytes(list.begin() + last_begin_, list.begin() + last_end_,
                               last_updates_, last_B_, last_T_);
      row.formula_text = "sends·" + std::to_string(e) + "bTC + updates·4VC (wte ranks)";
    }
  }
  return rows;
}

void PipeDream2BWStrategy::finish() {
  if (pp_.rank() != 0) return;
  const int p = pp_.size();
  const bool steady = !steady_logical_.empty();
  const std::vector<Span>& spans = steady ? steady_logical_ : last_logical_;
  const std::vector<double>& idle = steady ? steady_idle_ : segment_idle_;
  if (spans.empty()) return;
  double T = 0;
  for (const Span& s : spans) T = std::max(T, s.end);
  const int width = std::clamp(static_cast<int>(3 * T + 0.5), 1, 480);
  std::printf("\n%s", render_spans(spans, p, width,
                                   "pipedream_2bw p=" + std::to_string(p) + " m=" +
                                       std::to_string(m_) + ", " +
                                       (steady ? "a steady-state step" : "the last step") +
                                       " as EXECUTED (logical clock, F = 1, B = 2); ranks start "
                                       "their segments at different times",
                                   "idle share of this window (stagger, not idle ranks)")
                          .c_str());
  std::printf("idle per rank in that step (logical units, from the end of its previous step):");
  for (int q = 0; q < p; ++q) std::printf(" %g", idle[q]);
  std::printf("\n1F1B would idle (p-1)(F+B) = %d units per rank per step (bubble (p-1)/(m+p-1) = "
              "%.4f); PipeDream-2BW fills and drains once per run\n",
              3 * (p - 1), (p - 1.0) / (m_ + p - 1.0));
  std::printf("weight versions held: 2 × %s (rule: W(t+1) = AdamW(W(t), ∇f_t(W(t-1))))\n",
              format_bytes(double(dtype_size(params_.dtype())) * params_.numel()).c_str());
  write_trace_if_asked();
  std::fflush(stdout);
}

std::unique_ptr<PipeDream2BWStrategy> make_pipedream_2bw(const GPT& model, ProcessGroup& pp,
                                                         AdamWConfig opt, uint64_t seed, int m,
                                                         int64_t steps, const std::string& trace,
                                                         MixedPrecisionConfig mp) {
  return std::make_unique<PipeDream2BWStrategy>(model, pp, opt, seed, m, steps, trace, mp);
}

}  // namespace llmp
