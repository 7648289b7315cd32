// The walk (see unit_runner.h): the step list of a range, and what each step does.
#include "common/nn/unit_runner.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "common/nn/recompute.h"
#include "common/tensor/arena.h"
#include "common/tensor/memory.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

std::vector<WalkStep> walk_steps(const GPTConfig& cfg, const UnitRange& r, bool backward) {
  const int L = cfg.layers, end = r.first_block + r.num_blocks;
  std::vector<WalkStep> s;
  if (r.embed) s.push_back({WalkStep::kEmbed, -1, {0}});
  for (int l = r.first_block; l < end; ++l) s.push_back({WalkStep::kBlockForward, l, {1 + l}});
  if (r.head) s.push_back({WalkStep::kHead, -1, {L + 1, 0}});  // ln_f, then the tied wte
  if (backward) {
    for (int l = end - 1; l >= r.first_block; --l)
      s.push_back({WalkStep::kBlockBackward, l, {1 + l}});
    if (r.embed) s.push_back({WalkStep::kEmbedBackward, -1, {}});  // a scatter: no parameters
  }
  return s;
}

namespace {
// ZeRO-R's Pa+cpu (GPTConfig::cpu_checkpoints): a checkpoint's copy on `d`, counted as the
// activation it is. On the host it is plain (pageable) memory: cudaMemcpy stages it, which is
// slower than pinned memory but takes none of the host's page-locked budget.
Tensor copy_to(const Tensor& x, Device d) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), MemCategory::kActivations, d);
  y.copy_from(x);
  return y;
}
}  // namespace

int64_t Tape::stored_bytes() const {
  int64_t n = 0;
  for (const Tensor& t : x) n += t.nbytes();
  for (const BlockCache& c : cache) n += c.bytes();
  return n;
}

namespace {
UnitSpans layout_spans(const GPTLayout& layout) {
  return [&layout](int u) { return UnitSpan{layout.unit_offset(u), layout.unit_numel(u)}; };
}
}  // namespace

FlatParams::FlatParams(const GPTLayout& layout, const float* base)
    : FlatParams(layout_spans(layout), base) {}

FlatParams::FlatParams(const GPTLayout& layout, const Tensor& flat)
    : FlatParams(layout.num_units(), layout_spans(layout), flat) {
  if (flat.numel() != layout.num_params())
    throw std::invalid_argument("FlatParams: " + flat.describe() + " for " +
                                std::to_string(layout.num_params()) + " parameters");
}

FlatParams::FlatParams(UnitSpans spans, const float* base)
    : spans_(std::move(spans)), base_(base) {}

FlatParams::FlatParams(int num_units, UnitSpans spans, const Tensor& flat)
    : spans_(std::move(spans)) {
  if (flat.dtype() == DType::kF32) {
    base_ = flat.f32();
  } else {
    flat16_ = flat;
    widened_.resize(num_units);
  }
}

const float* FlatParams::get(int u) {
  const UnitSpan at = spans_(u);
  if (base_) return base_ + at.offset;
  Tensor& w = widened_.at(u);
  if (!w.defined()) {  // exact: every 16-bit value is an fp32 value
    w = Tensor::empty({at.numel}, DType::kF32, MemCategory::kOther, flat16_.device());
    KernelOps& ops = kernel_ops(flat16_.device());
    const void* src = flat16_.narrow(at.offset, at.numel).raw();
    ops.widen(src, flat16_.dtype(), w.f32(), at.numel);
    ops.note_source(w.f32(), src, flat16_.dtype(), at.numel);  // a GPU's 16-bit products read src
  }
  return w.f32();
}

void FlatParams::after_step(const std::vector<WalkStep>& steps, size_t k) {
  (void)steps, (void)k;
  for (Tensor& w : widened_) {
    if (w.defined()) kernel_ops(w.device()).forget_source(w.f32());
    w = Tensor();
  }
}

FlatParams::~FlatParams() { after_step({}, 0); }

FlatGrads::FlatGrads(const GPTLayout& layout, const Tensor& flat, std::function<void(int)> on_ready,
                     cpu::RoundStats* stats)
    : layout_(layout), on_ready_(std::move(on_ready)), stats_(stats) {
  if (flat.numel() != layout.num_params())
    throw std::invalid_argument("FlatGrads: " + flat.describe() + " for " +
                                std::to_string(layout.num_params()) + " parameters");
  if (flat.dtype() == DType::kF32) {
    base_ = flat.f32();
  } else {
    flat16_ = flat;
    acc_.resize(layout.num_units());
  }
}

float* FlatGrads::get(int u) {
  if (base_) return base_ + layout_.unit_offset(u);
  Tensor& a = acc_.at(u);
  if (!a.defined())
    a = Tensor::zeros({layout_.unit_numel(u)}, DType::kF32, MemCategory::kOther, flat16_.device());
  return a.f32();
}

void FlatGrads::ready(int u) {
  if (!base_) {
    Tensor& a = acc_.at(u);
    if (a.defined()) {  // round once into the 16-bit buffer, then free the fp32 accumulator
      // Counted on any device (a device counts apart, first: kernel_ops.h round_counted).
      round_counted(kernel_ops(flat16_.device()), a.f32(),
                    flat16_.narrow(layout_.unit_offset(u), a.numel()).raw(), flat16_.dtype(),
                    a.numel(), /*accumulate=*/true, stats_);
      a = Tensor();
    }
  }
  if (on_ready_) on_ready_(u);
}

UnitRunner::UnitRunner(const GPT& model, ParamSource& params, GradSink* grads)
    : model_(model), params_(params), grads_(grads) {}

double UnitRunner::run(const std::vector<WalkStep>& steps, const UnitRange& r, const Args& a,
                       Tape* tape) {
  // The load-balancing loss of MoE blocks is scaled like the cross-entropy (moe.h): the scale
  // of the forward walk stays set for its backward (which the pipelines run with scale 1).
  MoeContext* moe = model_.moe();
  if (moe && !steps.empty() &&
      (steps[0].kind == WalkStep::kEmbed || steps[0].kind == WalkStep::kBlockForward))
    moe->set_loss_scale(a.loss_scale);
  // Mixed precision: 16-bit parameters and activations of one dtype make every operand of the
  // walk's products a 16-bit value; the head's dlogits and attention's P and dS are the model's
  // to round (sublayer.h rounded_products: bf16 only).
  const DType act = model_.activation_dtype();
  const MatmulOperands operands(kernel_ops(model_.device()),
                                params_.values() == act ? act : DType::kF32);
  double loss = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    params_.before_step(steps, k);
    loss += step(steps[k], r, a, tape);
    params_.after_step(steps, k);
  }
  return loss;
}

bool UnitRunner::keeps_cache(int l) const {
  if (keep_) return keep_(l);
  return model_.config().recompute != Recompute::kFull;
}

bool UnitRunner::keeps_input(int l, const UnitRange& r) const {
  const GPTConfig& c = model_.config();
  if (keep_ || c.recompute != Recompute::kFull || c.recompute_every <= 1) return true;
  return (l - r.first_block) % c.recompute_every == 0;  // the segments' checkpoints, in the range
}

void UnitRunner::recompute_if_dropped(int j, const UnitRange& r, const Args& a, Tape* tape) {
  if (tape->cache[j].filled()) return;
  // Full recomputation from the nearest kept input at or before block j (its own, or its
  // segment's checkpoint): the forwards of blocks c..j run again; each keeps its cache for its
  // backward, and each output but block j's (not needed: dy comes from above) is the next one's
  // input. Later backwards of blocks c..j-1 then find their caches filled.
  CountRecomputedFlops count;
  int c = j;
  while (!tape->x[c].defined()) --c;  // the first block of a range always keeps its input
  if (tape->x[c].device() != model_.device()) {  // Pa+cpu: the checkpoint back up first
    tape->x[c] = copy_to(tape->x[c], model_.device());
    RecomputeMeter::instance().checkpoint_bytes_up += tape->x[c].nbytes();
  }
  if (tape->x[c].ndim() == 1)  // ZeRO-R Pa: this rank's part only; the whole from every rank
    tape->x[c] = model_.gather_checkpoint(tape->x[c], {a.B, a.T, model_.config().d});
  MoeContext* moe = model_.moe();  // a mixture of experts routes again without counting again
  if (moe) moe->set_recomputing(true);
  for (int i = c; i <= j; ++i) {
    Tensor y = model_.block_forward(r.first_block + i, params_.get(1 + r.first_block + i), tape->x[i], a.B, a.T,
                                    &tape->cache[i]);
    if (i < j) tape->x[i + 1] = std::move(y);
    ++stats_.recomputed_blocks;
  }
  if (moe) moe->set_recomputing(false);
  RecomputeMeter& meter = RecomputeMeter::instance();
  meter.recomputed_blocks += j - c + 1;
}

double UnitRunner::step(const WalkStep& s, const UnitRange& r, const Args& a, Tape* tape) {
  const int L = model_.config().layers;
  const int j = s.layer - r.first_block;  // block index within the range
  MemoryTracker& mt = MemoryTracker::instance();
  switch (s.kind) {
    case WalkStep::kEmbed:  // (B,T) tokens -> x_0 (B,Tl,C)
      tape->x.assign(1, model_.embed_forward(params_.get(0), a.tokens, a.B, a.T));
      return 0;
    case WalkStep::kBlockForward: {  // x_j -> x_{j+1}, keeping what the policy keeps
      const int64_t before = mt.current(MemCategory::kActivations);
      BlockCache cache;
      Tensor y = model_.block_forward(s.layer, params_.get(1 + s.layer), tape->x.back(), a.B, a.T, &cache);
      if (!a.train) {  // evaluation keeps nothing for a backward
        tape->x.assign(1, std::move(y));
        return 0;
      }
      if (!keeps_cache(s.layer)) cache = BlockCache{};  // recomputed in the backward
      tape->cache.push_back(std::move(cache));
      if (!keeps_input(s.layer, r)) {
        tape->x[j] = Tensor();  // remade from its segment's checkpoint
      } else if (!tape->cache.back().filled()) {  // x_j is a checkpoint
        if (model_.config().partition_checkpoints) {
          LongLivedScope keep;  // under --defrag (arena.h) Pa's part is a checkpoint like any other
          tape->x[j] = model_.partition_checkpoint(tape->x[j]);  // ZeRO-R Pa: keep 1/t of it
        }
        if (model_.config().cpu_checkpoints && model_.device() != Device::kCPU) {
          tape->x[j] = copy_to(tape->x[j], Device::kCPU);  // Pa+cpu: off the device until needed
          RecomputeMeter::instance().checkpoint_bytes_down += tape->x[j].nbytes();
        }
      }
      // ZeRO-R MD (arena.h): under full recomputation with a --defrag arena, an output that the
      // next block keeps as its checkpoint is copied into the long-lived region as it is made.
      const bool next_is_checkpoint = model_.config().recompute == Recompute::kFull &&
                                      j + 1 < r.num_blocks && keeps_input(s.layer + 1, r);
      if (next_is_checkpoint && y.device() == Device::kCPU && installed_cpu_arena() &&
          installed_cpu_arena()->mode() == Arena::Mode::kDefrag) {
        LongLivedScope keep;
        Tensor kept = Tensor::empty(y.shape(), y.dtype(), MemCategory::kActivations);
        kept.copy_from(y);
        y = std::move(kept);
      }
      tape->x.push_back(std::move(y));
      stats_.forward_stored_bytes += mt.current(MemCategory::kActivations) - before;
      stats_.block_stored_bytes = stats_.forward_stored_bytes / (j + 1);
      RecomputeMeter& meter = RecomputeMeter::instance();
      meter.forward_bytes = stats_.forward_stored_bytes;
      meter.forward_blocks = j + 1;
      meter.forward_batch = a.B;
      return 0;
    }
    case WalkStep::kHead: {  // x_k -> loss; when training also dy = dloss/dx_k (fused)
      const float* lnf = params_.get(L + 1);
      const float* wte = params_.get(0);  // this rank's rows of wte start unit 0
      if (!a.train)
        return model_.head_forward_backward(lnf, wte, tape->x.back(), a.targets, a.B, a.T,
                                            a.loss_scale, nullptr, nullptr, nullptr);
      float* lnf_grads = grads_->get(L + 1);
      float* wte_grads = grads_->get(0);
      const double loss =
          model_.head_forward_backward(lnf, wte, tape->x.back(), a.targets, a.B, a.T,
                                       a.loss_scale, &tape->dy, lnf_grads, wte_grads);
      tape->x.back() = Tensor();  // the head's input is not needed by the blocks' backward
      grads_->ready(L + 1);
      return loss;
    }
    case WalkStep::kBlockBackward: {  // dx_{j+1} -> dx_j; block gradients += ...
      recompute_if_dropped(j, r, a, tape);
      tape->dy = model_.block_backward(s.layer, params_.get(1 + s.layer), tape->x[j], &tape->cache[j],
                                       tape->dy, grads_->get(1 + s.layer));
      tape->x[j + 1] = Tensor();
      grads_->ready(1 + s.layer);
      return 0;
    }
    case WalkStep::kBlockBackwardInput:  // B: dx only, W's inputs kept
      recompute_if_dropped(j, r, a, tape);
      tape->dy = model_.block_backward_input(s.layer, params_.get(1 + s.layer), tape->x[j],
                                             &tape->cache[j], tape->dy, &tape->keep[j]);
      return 0;
    case WalkStep::kBlockBackwardWeight:  // W: block gradients += ..., then free the block
      model_.block_backward_weight(s.layer, params_.get(1 + s.layer), tape->x[j], tape->cache[j],
                                   tape->keep[j], grads_->get(1 + s.layer));
      tape->cache[j] = BlockCache{};
      tape->keep[j] = BlockGradCache{};
      tape->x[j + 1] = Tensor();
      grads_->ready(1 + s.layer);
      return 0;
    case WalkStep::kEmbedBackward:  // wte rows and wpe += scatter of dx_0
      model_.embed_backward(a.tokens, a.B, a.T, tape->dy, grads_->get(0));
      tape->dy = Tensor();
      grads_->ready(0);
      return 0;
  }
  return 0;
}

double UnitRunner::forward_backward(const int32_t* tokens, const int32_t* targets, int B, int T,
                                    float loss_scale) {
  if (!grads_) throw std::invalid_argument("forward_backward: the runner has no GradSink");
  const UnitRange whole = UnitRange::whole(model_.config().layers);
  Tape tape;
  stats_ = WalkStats{};
  return run(walk_steps(model_.config(), whole, /*backward=*/true), whole,
             {tokens, targets, B, T, loss_scale, true}, &tape);
}

double UnitRunner::forward_loss(const int32_t* tokens, const int32_t* targets, int B, int T) {
  const UnitRange whole = UnitRange::whole(model_.config().layers);
  Tape tape;
  const double sum = run(walk_steps(model_.config(), whole, /*backward=*/false), whole,
                         {tokens, targets, B, T, 1.0f, false}, &tape);
  return sum / (static_cast<double>(B) * T);
}

double UnitRunner::forward(const UnitRange& r, const int32_t* tokens, const int32_t* targets,
                           int B, int T, float loss_scale, bool train, Tape* tape) {
  if (train && r.head && !grads_)
    throw std::invalid_argument("forward: training through the head needs a GradSink");
  if (!r.embed && tape->x.size() != 1)
    throw std::invalid_argument("forward: the range's input x_0 is not in the tape");
  if (train) stats_ = WalkStats{};
  return run(walk_steps(model_.config(), r, false), r, {tokens, targets, B, T, loss_scale, train},
             tape);
}

namespace {
/// The backward steps of `r` with block steps of `kind`, and the embedding's backward when
/// `with_embed`.
std::vector<WalkStep> backward_steps(const UnitRange& r, WalkStep::Kind kind, bool with_embed) {
  std::vector<WalkStep> s;
  for (int l = r.first_block + r.num_blocks - 1; l >= r.first_block; --l)
    s.push_back({kind, l, {1 + l}});
  if (with_embed && r.embed) s.push_back({WalkStep::kEmbedBackward, -1, {}});
  return s;
}
}  // namespace

void UnitRunner::backward(const UnitRange& r, const int32_t* tokens, int B, int T, Tape* tape) {
  if (!tape->dy.defined()) throw std::invalid_argument("backward without the output gradient");
  run(backward_steps(r, WalkStep::kBlockBackward, true), r, {tokens, nullptr, B, T, 1, true},
      tape);
  if (!r.embed) tape->dx = std::move(tape->dy);
  tape->x.clear();
  tape->cache.clear();
}

void UnitRunner::backward_input(const UnitRange& r, int B, int T, Tape* tape) {
  if (!tape->dy.defined())
    throw std::invalid_argument("backward_input without the output gradient");
  tape->keep.assign(r.num_blocks, BlockGradCache{});
  run(backward_steps(r, WalkStep::kBlockBackwardInput, false), r, {nullptr, nullptr, B, T, 1, true},
      tape);
  if (!r.embed) tape->dx = std::move(tape->dy);  // else kept for the embedding's W
}

void UnitRunner::backward_weight(const UnitRange& r, const int32_t* tokens, int B, int T,
                                 Tape* tape) {
  if (tape->keep.size() != static_cast<size_t>(r.num_blocks))
    throw std::invalid_argument("backward_weight before backward_input");
  run(backward_steps(r, WalkStep::kBlockBackwardWeight, true), r, {tokens, nullptr, B, T, 1, true},
      tape);
  *tape = Tape{};  // all of the micro-batch's activations and kept gradients are freed
}

double forward_backward(const GPT& model, const float* params, float* grads,
                        const int32_t* tokens, const int32_t* targets, int B, int T,
                        float loss_scale, const std::function<void(int unit)>& on_unit_ready) {
  FlatParams p(model.layout(), params);
  FlatGrads g(model.layout(), grads, on_unit_ready);
  return UnitRunner(model, p, &g).forward_backward(tokens, targets, B, T, loss_scale);
}

double forward_loss(const GPT& model, const float* params, const int32_t* tokens,
                    const int32_t* targets, int B, int T) {
  FlatParams p(model.layout(), params);
  return UnitRunner(model, p).forward_loss(tokens, targets, B, T);
}

}  // namespace llmp
