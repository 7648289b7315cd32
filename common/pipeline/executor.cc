// PipelineExecutor (see executor.h): one rank's walk through its schedule.
#include "common/pipeline/executor.h"

#include <algorithm>
#include <utility>

#include "common/runtime/check.h"
#include "common/runtime/clock.h"

namespace llmp {
namespace {

Tensor activation(int b, int T, int C) {
  return Tensor::empty({b, T, C}, DType::kF32, MemCategory::kActivations);
}

int64_t cache_bytes(const BlockCache& c) {
  int64_t n = 0;
  for (const Tensor* t : {&c.ln1, &c.ln1_mean, &c.ln1_rstd, &c.qkv, &c.att, &c.atty, &c.res1,
                          &c.ln2, &c.ln2_mean, &c.ln2_rstd, &c.fch, &c.fch_gelu})
    n += t->nbytes();
  return n;
}

}  // namespace

PipelineExecutor::PipelineExecutor(const GPT& model, const GPTPartition& part, ProcessGroup& pp,
                                   const Schedule& schedule)
    : model_(model),
      part_(part),
      schedule_(schedule),
      link_{pp, schedule, pp.rank()},
      rank_(pp.rank()),
      v_(schedule.v) {
  LLMP_CHECK(schedule.p == pp.size() && schedule.p == part.p() && schedule.v == part.v(),
             "schedule p=" + std::to_string(schedule.p) + " v=" + std::to_string(schedule.v) +
                 ", pipeline group of " + std::to_string(pp.size()) + " ranks, partition p=" +
                 std::to_string(part.p()) + " v=" + std::to_string(part.v()));
}

int64_t PipelineExecutor::local(int chunk, int unit) const {
  const ParamSegment& seg = part_.segments(rank_).at(chunk);
  return seg.local_offset + (model_.layout().unit_offset(unit) - seg.global_offset);
}

int64_t PipelineExecutor::stored_bytes(const Slot& s) const {
  int64_t n = 0;
  for (const Tensor& t : s.x) n += t.nbytes();
  for (const BlockCache& c : s.cache) n += cache_bytes(c);
  return n;
}

double PipelineExecutor::run(const float* params, float* grads, const int32_t* tokens,
                             const int32_t* targets, int B, int T, double t0) {
  const int m = schedule_.m, C = model_.config().d;
  LLMP_CHECK(B % m == 0, "global batch " + std::to_string(B) + " is not divisible by " +
                             std::to_string(m) + " micro-batches");
  b_ = B / m, T_ = T;
  scale_ = 1.0f / (static_cast<float>(B) * T);  // every micro-batch's loss counts toward the mean
  slots_.assign(static_cast<size_t>(m) * v_, Slot());
  stats_ = ExecutorStats();
  in_flight_ = 0;
  MemoryTracker& mem = MemoryTracker::instance();
  const int64_t act_before = mem.current(MemCategory::kActivations);
  mem.reset_peak();
  double loss = 0;

  for (const Action& a : schedule_.ranks.at(rank_)) {
    const double start = wall_seconds();
    Slot& s = slot(a);
    switch (a.op) {
      case Op::kRecvForward:
        s.x.assign(1, activation(b_, T_, C));
        recv_forward(link_, a, s.x[0]);
        break;
      case Op::kForward:
        ++in_flight_;
        forward(a, params, grads, tokens, targets, &loss);
        break;
      case Op::kSendForward:
        send_forward(link_, a, s.x.back(), &pending_);
        s.x.back() = Tensor();  // the output is not needed here any more; pending_ holds it
        break;
      case Op::kRecvBackward:
        s.dy = activation(b_, T_, C);
        recv_backward(link_, a, s.dy);
        break;
      case Op::kBackward:
        stats_.stored_per_forward = std::max(stats_.stored_per_forward, stored_bytes(s));
        backward(a, params, grads, tokens);
        --in_flight_;
        break;
      case Op::kBackwardInput:
        stats_.stored_per_forward = std::max(stats_.stored_per_forward, stored_bytes(s));
        backward_input(a, params);
        break;
      case Op::kBackwardWeight:
        backward_weight(a, params, grads, tokens);
        --in_flight_;
        break;
      case Op::kSendBackward:
        send_backward(link_, a, s.dx, &pending_);
        s.dx = Tensor();
        break;
    }
    stats_.peak_in_flight = std::max(stats_.peak_in_flight, in_flight_);
    stats_.spans.push_back(make_span(rank_, a, v_, start - t0, wall_seconds() - t0));
    pending_.poll();
  }
  pending_.wait_all();  // sends complete by the end of the step
  slots_.clear();
  stats_.peak_activation_bytes = mem.peak(MemCategory::kActivations) - act_before;
  return loss;
}

void PipelineExecutor::forward(const Action& a, const float* params, float* grads,
                               const int32_t* tokens, const int32_t* targets, double* loss) {
  const VirtualStage vs = part_.stage(rank_, a.chunk);
  const int C = model_.config().d, L = model_.config().layers, k = vs.num_blocks;
  const int64_t rows = static_cast<int64_t>(a.microbatch) * b_ * T_;  // micro-batch i's tokens
  Slot& s = slot(a);
  if (vs.first) {  // x_0 = wte[tokens_i] + wpe  (b,T,C)
    s.x.assign(1, activation(b_, T_, C));
    model_.embed_forward(params + local(a.chunk, 0), tokens + rows, b_, T_, s.x[0].f32());
  }
  LLMP_CHECK(s.x.size() == 1, "forward before recv_forward: " + to_string(a));
  s.cache.resize(k);
  for (int j = 0; j < k; ++j) {  // x_{j+1} = block(x_j)  (b,T,C) -> (b,T,C)
    s.x.push_back(activation(b_, T_, C));
    const int unit = 1 + vs.first_block + j;
    model_.block_forward(params + local(a.chunk, unit), s.x[j].f32(), b_, T_, s.x[j + 1].f32(),
                         &s.cache[j]);
  }
  if (vs.last) {  // fused head: loss_i and dy = d(loss)/dx_k now; lnf and wte grads accumulate
    s.dy = activation(b_, T_, C);
    const int64_t wte = part_.wte_local_offset(rank_);
    *loss += model_.head_forward_backward(params + local(a.chunk, L + 1), params + wte,
                                          s.x[k].f32(), targets + rows, b_, T_, scale_,
                                          s.dy.f32(), grads + local(a.chunk, L + 1), grads + wte);
    s.x[k] = Tensor();  // the head's input is not needed by the blocks' backward
  }
}

void PipelineExecutor::backward(const Action& a, const float* params, float* grads,
                                const int32_t* tokens) {
  const VirtualStage vs = part_.stage(rank_, a.chunk);
  const int C = model_.config().d;
  Slot& s = slot(a);
  LLMP_CHECK(s.dy.defined(), "backward without the output gradient: " + to_string(a));
  Tensor d = std::move(s.dy), d_prev = activation(b_, T_, C);
  for (int j = vs.num_blocks - 1; j >= 0; --j) {  // dx_j from dx_{j+1}; grads += ...
    const int64_t u = local(a.chunk, 1 + vs.first_block + j);
    model_.block_backward(params + u, s.x[j].f32(), s.cache[j], d.f32(), d_prev.f32(), grads + u);
    std::swap(d, d_prev);
    s.cache[j] = BlockCache();  // block j's activations are freed as soon as they are used
    s.x[j + 1] = Tensor();
  }
  if (vs.first) {  // wte rows and wpe += scatter of dx_0
    const int64_t rows = static_cast<int64_t>(a.microbatch) * b_ * T_;
    model_.embed_backward(tokens + rows, b_, T_, d.f32(), grads + local(a.chunk, 0));
  } else {
    s.dx = std::move(d);
  }
  s.x.clear();
  s.cache.clear();
}

void PipelineExecutor::backward_input(const Action& a, const float* params) {
  const VirtualStage vs = part_.stage(rank_, a.chunk);
  const int C = model_.config().d;
  Slot& s = slot(a);
  LLMP_CHECK(s.dy.defined(), "backward_input without the output gradient: " + to_string(a));
  s.keep.resize(vs.num_blocks);
  Tensor d = std::move(s.dy), d_prev = activation(b_, T_, C);
  for (int j = vs.num_blocks - 1; j >= 0; --j) {  // dx only; W's inputs are kept in s.keep[j]
    const int64_t u = local(a.chunk, 1 + vs.first_block + j);
    block_backward_input(model_, params + u, s.x[j].f32(), &s.cache[j], d.f32(), d_prev.f32(),
                         &s.keep[j]);
    std::swap(d, d_prev);
  }
  s.dx = std::move(d);  // sent backward, or (virtual stage 0) kept for the embedding's W
}

void PipelineExecutor::backward_weight(const Action& a, const float* params, float* grads,
                                       const int32_t* tokens) {
  const VirtualStage vs = part_.stage(rank_, a.chunk);
  Slot& s = slot(a);
  LLMP_CHECK(s.keep.size() == static_cast<size_t>(vs.num_blocks),
             "backward_weight before backward_input: " + to_string(a));
  for (int j = vs.num_blocks - 1; j >= 0; --j) {
    const int64_t u = local(a.chunk, 1 + vs.first_block + j);
    block_backward_weight(model_, params + u, s.x[j].f32(), s.cache[j], s.keep[j], grads + u);
  }
  if (vs.first) {  // the embedding has weights only: its whole backward is W
    const int64_t rows = static_cast<int64_t>(a.microbatch) * b_ * T_;
    model_.embed_backward(tokens + rows, b_, T_, s.dx.f32(), grads + local(a.chunk, 0));
  }
  s = Slot();  // all of the micro-batch's activations and kept gradients are freed
}

double PipelineExecutor::forward_only(const float* params, const int32_t* tokens,
                                      const int32_t* targets, int B, int T) {
  const int m = schedule_.m, C = model_.config().d, L = model_.config().layers;
  b_ = B / m, T_ = T;
  const float scale = 1.0f / (static_cast<float>(B) * T);
  double loss = 0;
  // Every rank visits (micro-batch i, virtual stage s) in the same global order and acts on the
  // stages it holds: sends never block, so each recv's send comes earlier in that order.
  for (int i = 0; i < m; ++i) {
    for (int vstage = 0; vstage < part_.num_virtual_stages(); ++vstage) {
      if (part_.rank_of(vstage) != rank_) continue;
      const VirtualStage vs = part_.stage(rank_, part_.chunk_of(vstage));
      const int64_t rows = static_cast<int64_t>(i) * b_ * T_;
      Tensor x = activation(b_, T_, C), y = activation(b_, T_, C);
      if (vs.first)
        model_.embed_forward(params + local(vs.chunk, 0), tokens + rows, b_, T_, x.f32());
      else
        recv_forward(link_, {Op::kRecvForward, i, vs.chunk}, x);
      for (int j = 0; j < vs.num_blocks; ++j) {
        BlockCache cache;  // filled and dropped: no backward follows
        model_.block_forward(params + local(vs.chunk, 1 + vs.first_block + j), x.f32(), b_, T_,
                             y.f32(), &cache);
        std::swap(x, y);
      }
      if (vs.last)
        loss += model_.head_forward_backward(params + local(vs.chunk, L + 1),
                                             params + part_.wte_local_offset(rank_), x.f32(),
                                             targets + rows, b_, T_, scale, nullptr, nullptr,
                                             nullptr);
      else
        send_forward(link_, {Op::kSendForward, i, vs.chunk}, x, &pending_);
    }
  }
  pending_.wait_all();
  return loss;
}

}  // namespace llmp
