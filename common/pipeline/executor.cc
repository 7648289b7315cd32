// PipelineExecutor (see executor.h): one rank's walk through its schedule. Each forward and
// backward is the shared walk (common/nn/unit_runner.h) over the action's chunk, reading this
// rank's local buffers through the partition (gpt_partition.h).
#include "common/pipeline/executor.h"

#include <algorithm>
#include <utility>

#include "common/runtime/check.h"
#include "common/runtime/clock.h"

namespace llmp {
namespace {

/// A received activation or gradient (b,T,C) in the walk's activation dtype (f32, or 16 bits
/// under mixed precision: 2·b·T·C bytes on the wire), where the walk runs (GPT::device()): a
/// recv into a device tensor is staged by the backend (process_group_staging.h).
Tensor activation(const GPT& model, int b, int T) {
  return Tensor::empty({b, T / model.seq_shards(), model.config().d}, model.activation_dtype(),
                       MemCategory::kActivations, model.device());
}

/// Unit u of a pipeline rank's local buffer (parameters or gradients, same layout).
int64_t local_offset(const GPTPartition& part, int rank, int u) {
  const int64_t at = part.unit_local_offset(rank, u);
  LLMP_CHECK(at >= 0, "rank " + std::to_string(rank) + " does not hold unit " + std::to_string(u));
  return at;
}

/// Where unit u lies in a pipeline rank's local buffer, and how much of it is there.
UnitSpans local_spans(const GPTPartition& part, int rank) {
  return [&part, rank](int u) {
    return UnitSpan{local_offset(part, rank, u), part.unit_local_numel(rank, u)};
  };
}

class LocalGrads : public GradSink {
 public:
  LocalGrads(const GPTPartition& part, int rank, float* base)
      : part_(part), rank_(rank), base_(base) {}
  float* get(int u) override { return base_ + local_offset(part_, rank_, u); }

 private:
  const GPTPartition& part_;
  int rank_;
  float* base_;
};

}  // namespace

PipelineExecutor::PipelineExecutor(const GPT& model, const GPTPartition& part, ProcessGroup& pp,
                                   const Schedule& schedule, LogicalCosts clock_costs)
    : model_(model),
      part_(part),
      schedule_(schedule),
      clock_group_(pp.duplicate()),
      link_{pp, schedule, pp.rank(), *clock_group_},
      clock_(clock_costs),
      rank_(pp.rank()),
      v_(schedule.v) {
  LLMP_CHECK(schedule.p == pp.size() && schedule.p == part.p() && schedule.v == part.v(),
             "schedule p=" + std::to_string(schedule.p) + " v=" + std::to_string(schedule.v) +
                 ", pipeline group of " + std::to_string(pp.size()) + " ranks, partition p=" +
                 std::to_string(part.p()) + " v=" + std::to_string(part.v()));
}

UnitRange PipelineExecutor::range(int chunk) const {
  const VirtualStage vs = part_.stage(rank_, chunk);
  return {vs.first_block, vs.num_blocks, vs.first, vs.last};
}

double PipelineExecutor::run(const Tensor& params, float* grads, const int32_t* tokens,
                             const int32_t* targets, int B, int T, double t0) {
  LocalGrads sink(part_, rank_, grads);
  return run(params, sink, tokens, targets, B, T, t0);
}

double PipelineExecutor::run(const Tensor& params, GradSink& sink, const int32_t* tokens,
                             const int32_t* targets, int B, int T, double t0) {
  const int m = schedule_.m;
  LLMP_CHECK(B % m == 0, "global batch " + std::to_string(B) + " is not divisible by " +
                             std::to_string(m) + " micro-batches");
  begin_run(B / m, B, T, static_cast<size_t>(m) * v_, /*reset_clock=*/true);
  FlatParams source(model_.layout().num_units(), local_spans(part_, rank_), params);
  UnitRunner runner(model_, source, &sink);
  double loss = 0;
  for (const Action& a : schedule_.ranks.at(rank_))
    execute(a, runner, tokens + rows(a), targets + rows(a), t0, &loss);
  pending_.wait_all();  // sends complete by the end of the step
  tapes_.clear();
  end_run();
  return loss;
}

void PipelineExecutor::begin_run(int b, int B, int T, size_t num_tapes, bool reset_clock) {
  b_ = b, T_ = T;
  // Every micro-batch's loss counts toward the mean over B (or the set loss batch) sequences.
  // Times fp16's loss scale S (set_loss_multiplier; 1 otherwise).
  scale_ = loss_multiplier_ / (static_cast<float>(loss_batch_ > 0 ? loss_batch_ : B) * T);
  if (num_tapes > 0) tapes_.assign(num_tapes, Tape());
  const int64_t stored = stats_.stored_per_forward;
  stats_ = ExecutorStats();
  if (reset_clock) in_flight_ = 0, clock_.reset();
  else stats_.stored_per_forward = stored;  // a stream's later segment: the max over the stream
  MemoryTracker& mem = MemoryTracker::instance();
  act_before_ = mem.current(MemCategory::kActivations);
  mem.reset_peak();
}

void PipelineExecutor::end_run() {
  stats_.peak_activation_bytes =
      MemoryTracker::instance().peak(MemCategory::kActivations) - act_before_;
}

void PipelineExecutor::execute(const Action& a, UnitRunner& runner, const int32_t* tokens,
                               const int32_t* targets, double t0, double* loss) {
  const double start = wall_seconds();
  Tape& tp = tape(a);
  // The op's logical interval (logical_clock.h): compute ops take their cost, a send happens
  // at the end of the op that produced its tensor, a recv ends at its message's logical time.
  LogicalInterval logical = is_compute(a.op) ? clock_.compute(a.op) : clock_.send();
  switch (a.op) {
    case Op::kRecvForward:
      tp.x.assign(1, activation(model_, b_, T_));
      logical = clock_.receive(recv_forward(link_, a, tp.x[0]));
      break;
    case Op::kForward: {
      ++in_flight_;
      const UnitRange r = range(a.chunk);
      LLMP_CHECK(r.embed || tp.x.size() == 1, "forward before recv_forward: " + to_string(a));
      // x_0 = embed(tokens_i) or the received input; x_{j+1} = block(x_j); on the last virtual
      // stage the fused head: loss_i and dy = d(loss)/dx_k now, ln_f and wte grads accumulate.
      *loss += runner.forward(r, tokens, targets, b_, T_, scale_, /*train=*/true, &tp);
      break;
    }
    case Op::kSendForward:
      send_forward(link_, a, tp.x.back(), clock_.now(), &pending_);
      tp.x.back() = Tensor();  // the output is not needed here any more; pending_ holds it
      break;
    case Op::kRecvBackward:
      tp.dy = activation(model_, b_, T_);
      logical = clock_.receive(recv_backward(link_, a, tp.dy));
      break;
    case Op::kBackward:  // dx_j from dx_{j+1} through the blocks in reverse; grads += ...
      stats_.stored_per_forward = std::max(stats_.stored_per_forward, tp.stored_bytes());
      runner.backward(range(a.chunk), tokens, b_, T_, &tp);
      --in_flight_;
      break;
    case Op::kBackwardInput:  // dx only; W's inputs are kept in the tape
      stats_.stored_per_forward = std::max(stats_.stored_per_forward, tp.stored_bytes());
      runner.backward_input(range(a.chunk), b_, T_, &tp);
      break;
    case Op::kBackwardWeight:  // the weight gradients (and the embedding's, virtual stage 0)
      runner.backward_weight(range(a.chunk), tokens, b_, T_, &tp);
      --in_flight_;
      break;
    case Op::kSendBackward:
      send_backward(link_, a, tp.dx, clock_.now(), &pending_);
      tp.dx = Tensor();
      break;
  }
  stats_.peak_in_flight = std::max(stats_.peak_in_flight, in_flight_);
  stats_.spans.push_back(make_span(rank_, a, v_, start - t0, wall_seconds() - t0));
  stats_.logical_spans.push_back(make_span(rank_, a, v_, logical.start, logical.end));
  pending_.poll();
}

double PipelineExecutor::run_segment(const std::vector<Action>& actions, size_t begin,
                                     size_t end, int m_batch, int B, int T,
                                     const StreamBatches& io, double t0) {
  LLMP_CHECK(m_batch >= 1 && B % m_batch == 0,
             "global batch " + std::to_string(B) + " is not divisible by " +
                 std::to_string(m_batch) + " micro-batches");
  const bool first = tapes_.empty();  // the stream's first segment (finish_stream() clears)
  begin_run(B / m_batch, B, T, first ? static_cast<size_t>(schedule_.m) * v_ : 0, first);
  double loss = 0;
  for (size_t i = begin; i < end; ++i) {
    const Action& a = actions.at(i);
    const int batch = a.microbatch / m_batch;
    const int64_t at = static_cast<int64_t>(a.microbatch % m_batch) * b_ * T_;
    // The weight version and the gradient buffer of the micro-batch's own batch.
    FlatParams source(model_.layout().num_units(), local_spans(part_, rank_), io.params(batch));
    LocalGrads sink(part_, rank_, io.grads(batch));
    UnitRunner runner(model_, source, &sink);
    execute(a, runner, io.tokens(batch) + at, io.targets(batch) + at, t0, &loss);
  }
  end_run();
  return loss;
}

void PipelineExecutor::finish_stream() {
  pending_.wait_all();
  tapes_.clear();
}

double PipelineExecutor::forward_only(const Tensor& params, const int32_t* tokens,
                                      const int32_t* targets, int B, int T, int micro_batches) {
  const int m = micro_batches > 0 ? micro_batches : schedule_.m;
  b_ = B / m, T_ = T;
  const float scale = 1.0f / (static_cast<float>(loss_batch_ > 0 ? loss_batch_ : B) * T);
  FlatParams source(model_.layout().num_units(), local_spans(part_, rank_), params);
  UnitRunner runner(model_, source);
  PendingSends sends;
  double loss = 0;
  // Every rank visits (micro-batch i, virtual stage s) in the same global order and acts on the
  // stages it holds: sends never block, so each recv's send comes earlier in that order.
  for (int i = 0; i < m; ++i) {
    for (int vstage = 0; vstage < part_.num_virtual_stages(); ++vstage) {
      if (part_.rank_of(vstage) != rank_) continue;
      const int chunk = part_.chunk_of(vstage);
      const UnitRange r = range(chunk);
      const int64_t at = static_cast<int64_t>(i) * b_ * T_;
      Tape tp;
      if (!r.embed) {
        tp.x.assign(1, activation(model_, b_, T_));
        recv_forward(link_, {Op::kRecvForward, i, chunk}, tp.x[0]);  // no timeline: time unused
      }
      loss += runner.forward(r, tokens + at, targets + at, b_, T_, scale, /*train=*/false, &tp);
      if (!r.head) send_forward(link_, {Op::kSendForward, i, chunk}, tp.x.back(), 0.0, &sends);
    }
  }
  sends.wait_all();  // its own sends only: a stream's may wait for their receiver's next segment
  return loss;
}

}  // namespace llmp
