// The walk over the GPT's units, once for every stage: embed, blocks, head, and back.
//
//   forward    E    embed            reads unit 0           x_0 = wte[tokens] + wpe
//              F_l  block l forward  reads unit 1+l         x_{l+1} = block_l(x_l)
//              H    head             reads units L+1 and 0  the loss; when training also its
//                                                           backward (fused, llm.c): dx_L and the
//                                                           gradients of ln_f and of wte (tied)
//   backward   G_l  block l backward reads unit 1+l         dx_l, gradients of block l
//              Eb   embed backward   reads nothing          gradients of wte, wpe (scatter of dx_0)
//
// A stage changes only where a unit's parameters come from and what happens to its gradients,
// through two hooks (Megatron-Core's schedules and llm.c's gpt2_forward/backward are the models):
//
//   ParamSource  get(u): the unit's parameters; before_step / after_step around every step:
//                a flat buffer (baseline, DP), a pipeline rank's local buffer, ZeRO-3's gatherer
//                (all_gather before, free after, prefetch of the next step's units)
//   GradSink     get(u): where the unit's gradients accumulate; ready(u) as soon as they are
//                final (DDP launches a bucket, ZeRO-2/3 reduce-scatter and free the unit)
//
// Which activations a block keeps for its backward is the model's recomputation policy
// (GPTConfig::recompute, recompute.h): none, full (only block inputs kept; with recompute_every k
// only every k-th block's input, the segments between run forward again from it) or selective
// (attention's probabilities made again, inside the block). set_keep_activations overrides the
// policy block by block (tests; a pipeline that keeps some stages whole).
// The shapes a rank holds (a tensor-parallel slice) and the communication inside a layer come with
// the GPT object (gpt.h, tp_comm.h), never from the walk.
//
// Pipelines walk a range of units per micro-batch (a virtual stage): forward() and backward(),
// or backward_input() and backward_weight() for zero-bubble schedules; a Tape holds what a
// range's forward keeps for its backward. Whole-model stages call forward_backward().
//
// Glossary: B batch, T sequence, C channels, L layers, u unit (0 embeddings, 1+l block l,
// L+1 final LayerNorm), k blocks in a range, j block index within the range.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/nn/gpt.h"
#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"

namespace llmp {

/// One step of a walk and the units whose parameters it reads.
struct WalkStep {
  enum Kind { kEmbed, kBlockForward, kHead, kBlockBackward, kBlockBackwardInput,
              kBlockBackwardWeight, kEmbedBackward };
  Kind kind;
  int layer = -1;          ///< l for the block steps (unit 1+l)
  std::vector<int> units;  ///< read by the step (gathered before it runs, under ZeRO-3)
};

/// A contiguous range of the model: blocks [first_block, first_block + num_blocks), with the
/// embeddings before them and/or the head after them (a pipeline's virtual stage).
struct UnitRange {
  int first_block = 0;
  int num_blocks = 0;
  bool embed = false;  ///< starts with unit 0
  bool head = false;   ///< ends with unit L+1 (and reads wte for the tied head)
  static UnitRange whole(int layers) { return {0, layers, true, true}; }
};

/// The forward steps of `r` (E?, F_l..., H?), then with `backward` its backward (G_l..., Eb?).
std::vector<WalkStep> walk_steps(const GPTConfig& cfg, const UnitRange& r, bool backward);

/// Where the walk reads a unit's parameters (this rank's layout, GPT::layout()).
class ParamSource {
 public:
  virtual ~ParamSource() = default;
  /// Unit u's first parameter. For the head, get(0) must start with this rank's rows of wte.
  virtual const float* get(int unit) = 0;
  /// The dtype whose values get()'s floats are: f32 (any fp32 values, the default), or f16 /
  /// bf16 when they are widened copies of 16-bit parameters (mixed precision). With 16-bit
  /// activations of the same dtype, the walk declares its products' operands 16-bit values
  /// (KernelOps::set_matmul_operands: TF32 tensor cores on a GPU, an exactness check on the CPU).
  virtual DType values() const { return DType::kF32; }
  /// Around step k of `steps` (ZeRO-3: gather and prefetch before, free after). Default: nothing.
  virtual void before_step(const std::vector<WalkStep>& steps, size_t k) { (void)steps, (void)k; }
  virtual void after_step(const std::vector<WalkStep>& steps, size_t k) { (void)steps, (void)k; }
};

/// Where the walk accumulates a unit's gradients, and who hears when they are final.
class GradSink {
 public:
  virtual ~GradSink() = default;
  /// Unit u's gradient buffer (same layout as its parameters); the walk ADDS into it.
  virtual float* get(int unit) = 0;
  /// Unit u's gradients are final for this walk: L+1, L, ..., 1, then 0 (unit 0 last: the tied
  /// wte gets its head gradient first and its embedding gradient last). Default: nothing.
  virtual void ready(int unit) { (void)unit; }
};

/// Where unit u's parameters lie in a flat buffer: its first element and how many. A rank's local
/// layout may hold less of a unit than the model has: a pipeline's last stage holds of unit 0
/// only its copy of wte (common/pipeline/gpt_partition.h unit_local_numel).
struct UnitSpan {
  int64_t offset = 0;  ///< elements into the flat buffer
  int64_t numel = 0;   ///< elements of the unit held there
};
using UnitSpans = std::function<UnitSpan(int unit)>;

/// The parameters in one flat buffer: f32, or the 16-bit working copy of mixed precision. A
/// 16-bit unit is widened to an fp32 copy when a walk step reads it (exact), and the copies are
/// freed after the step (MemCategory::kOther, "conversion scratch": where a GPU's tensor cores
/// widen 16-bit tiles in registers; f32_view.h). The buffer is the whole model's (the layout's
/// offsets) or a rank's own layout (`spans`).
class FlatParams : public ParamSource {
 public:
  FlatParams(const GPTLayout& layout, const float* base);
  /// `flat`: layout.num_params() elements of f32, f16 or bf16. Must outlive the source.
  FlatParams(const GPTLayout& layout, const Tensor& flat);
  /// A rank's own layout: unit u at spans(u) of `base` (f32) or of `flat` (f32, f16 or bf16,
  /// units [0, num_units): one widened copy per unit at most).
  FlatParams(UnitSpans spans, const float* base);
  FlatParams(int num_units, UnitSpans spans, const Tensor& flat);
  ~FlatParams() override;
  FlatParams(const FlatParams&) = delete;
  FlatParams& operator=(const FlatParams&) = delete;
  const float* get(int u) override;
  DType values() const override { return base_ ? DType::kF32 : flat16_.dtype(); }
  void after_step(const std::vector<WalkStep>& steps, size_t k) override;

 private:
  UnitSpans spans_;
  const float* base_ = nullptr;  // f32
  Tensor flat16_;                // 16-bit
  std::vector<Tensor> widened_;  // per unit, while a step reads it
};

/// The gradients in one flat buffer of the layout; `on_ready(u)` when unit u is final.
///
/// With a 16-bit buffer (mixed precision) the walk accumulates unit u's gradients in an fp32
/// buffer of the unit's size (MemCategory::kOther: a GEMM's fp32 accumulator), and ready(u)
/// rounds it INTO the 16-bit buffer (g16 = round(g16 + g32): accumulation over micro-batches
/// rounds once per walk), frees it, and then calls on_ready(u). `stats` (optional) counts what
/// that rounding did: underflows to zero, overflows to inf (kernels/cpu/convert.h); on a device
/// through KernelOps::count_rounding before the rounding (kernels/ops round_counted).
class FlatGrads : public GradSink {
 public:
  FlatGrads(const GPTLayout& layout, float* base, std::function<void(int)> on_ready = {})
      : layout_(layout), base_(base), on_ready_(std::move(on_ready)) {}
  /// `flat`: layout.num_params() elements of f32, f16 or bf16. Must outlive the sink.
  FlatGrads(const GPTLayout& layout, const Tensor& flat, std::function<void(int)> on_ready = {},
            cpu::RoundStats* stats = nullptr);
  float* get(int u) override;
  void ready(int u) override;

 private:
  const GPTLayout& layout_;
  float* base_ = nullptr;  // f32
  Tensor flat16_;          // 16-bit
  std::function<void(int)> on_ready_;
  cpu::RoundStats* stats_ = nullptr;
  std::vector<Tensor> acc_;  // per unit, fp32, from its first += to ready
};

/// What a range's forward keeps for its backward (one micro-batch). All kActivations.
struct Tape {
  std::vector<Tensor> x;              ///< x[j] the input of block j of the range; x[k] its output
  std::vector<BlockCache> cache;      ///< k (empty caches for blocks that will recompute)
  std::vector<BlockGradCache> keep;   ///< k, between backward_input and backward_weight
  Tensor dy;                          ///< the gradient flowing back (from the head, or received)
  Tensor dx;                          ///< the gradient of the range's input, to send backward
  /// Bytes of the x[j] and caches held now: what the forward stored for the backward.
  int64_t stored_bytes() const;
};

/// Measurements of the last walk.
struct WalkStats {
  /// kActivations bytes the blocks' forwards added and kept (their caches and outputs, each
  /// output being the next block's stored input, minus the inputs the policy dropped), from the
  /// MemoryTracker, over the last training forward of a range ...
  int64_t forward_stored_bytes = 0;
  /// ... and per block (the average over its blocks): "activations per block".
  int64_t block_stored_bytes = 0;
  int recomputed_blocks = 0;  ///< block forwards run again in the backward
};

class UnitRunner {
 public:
  /// `grads` may be nullptr for forward-only walks. The references must outlive the runner.
  UnitRunner(const GPT& model, ParamSource& params, GradSink* grads = nullptr);

  /// The recompute hook: keep(l) false drops block l's activations (not its input) after its
  /// forward and runs its forward again right before its backward. Default: the model's policy
  /// (GPTConfig::recompute); a hook set here replaces it (inputs are then always kept).
  void set_keep_activations(std::function<bool(int layer)> keep) { keep_ = std::move(keep); }

  /// Forward and backward over the whole model on tokens/targets (B,T) in one walk (so a
  /// ParamSource sees every step, the head-to-backward boundary included). Gradients of
  /// loss_scale·Σ loss accumulate into the GradSink. Returns loss_scale·Σ loss.
  double forward_backward(const int32_t* tokens, const int32_t* targets, int B, int T,
                          float loss_scale);
  /// Mean loss (nats per token) over the whole model, without gradients.
  double forward_loss(const int32_t* tokens, const int32_t* targets, int B, int T);

  /// The forward of a range. Input: tokens (range.embed) or tape->x = {x_0}. Output: with
  /// range.head the loss (and, when `train`, tape->dy from the fused head backward); otherwise
  /// tape->x.back() is the range's output. Returns loss_scale·Σ loss on the head, else 0.
  /// `train` keeps the activations for a backward; otherwise each is freed once used.
  double forward(const UnitRange& r, const int32_t* tokens, const int32_t* targets, int B, int T,
                 float loss_scale, bool train, Tape* tape);
  /// The backward of a range from tape->dy: gradients into the GradSink; tape->dx receives the
  /// input gradient unless the range starts with the embeddings. Frees the tape's activations.
  void backward(const UnitRange& r, const int32_t* tokens, int B, int T, Tape* tape);
  /// Zero bubble: the input-gradient half (tape->dx as backward's), keeping W's inputs ...
  void backward_input(const UnitRange& r, int B, int T, Tape* tape);
  /// ... and the weight-gradient half later (embed backward included). Frees the tape.
  void backward_weight(const UnitRange& r, const int32_t* tokens, int B, int T, Tape* tape);

  const WalkStats& stats() const { return stats_; }

 private:
  struct Args {
    const int32_t* tokens;
    const int32_t* targets;
    int B, T;
    float loss_scale;
    bool train;
  };
  double run(const std::vector<WalkStep>& steps, const UnitRange& r, const Args& a, Tape* tape);
  double step(const WalkStep& s, const UnitRange& r, const Args& a, Tape* tape);
  /// Whether block l keeps its cache / its input (the policy, or the hook).
  bool keeps_cache(int l) const;
  bool keeps_input(int l, const UnitRange& r) const;
  /// Before the backward of block j of r: when its cache was dropped, runs the forwards from the
  /// nearest kept input up to block j again (RecomputeMeter counts them).
  void recompute_if_dropped(int j, const UnitRange& r, const Args& a, Tape* tape);

  const GPT& model_;
  ParamSource& params_;
  GradSink* grads_;
  std::function<bool(int)> keep_;
  WalkStats stats_;
};

/// forward_backward with the parameters and gradients in flat buffers of model.layout();
/// on_unit_ready(u) as soon as unit u's gradients are final (L+1, L, ..., 0).
double forward_backward(const GPT& model, const float* params, float* grads,
                        const int32_t* tokens, const int32_t* targets, int B, int T,
                        float loss_scale, const std::function<void(int unit)>& on_unit_ready = {});

/// Mean cross-entropy (nats per token) of tokens/targets (B,T) without gradients.
double forward_loss(const GPT& model, const float* params, const int32_t* tokens,
                    const int32_t* targets, int B, int T);

}  // namespace llmp
