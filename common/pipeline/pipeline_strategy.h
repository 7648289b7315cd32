// PipelineStrategy: pipeline parallelism as a Strategy (common/train/strategy.h), for any
// schedule (naive, GPipe, 1F1B, interleaved 1F1B, ZB-H1, Chimera): the stages differ only in the
// Schedule they hand in. PipeDream-2BW (stages/pipedream_2bw) derives from it: the same state,
// its own flush-free step.
//
// Every rank of the pipeline group reads the WHOLE global batch (virtual stage 0 uses the
// tokens, the last one the targets) and holds only its virtual stages' parameters, gradients
// and AdamW state (gpt_partition.h). One step:
//
//   1. barrier, t0 = wall_seconds()     (so that measured spans line up across ranks)
//   2. executor.run(...)                the schedule's forwards/backwards; grads += per micro-batch
//   3. all_reduce of the wte gradient over the embedding group {first rank, last rank}: the
//      tied head's gradient (last stage) plus the embedding's (first stage), as in Megatron-LM;
//      both copies of wte then take the same AdamW step and stay identical.
//                                       sends 2(N-1)/N·4VC = 4VC bytes (N = 2)
//      Chimera instead: ranks r and p-1-r hold the same two stages (one per pipeline, same
//      local layout), each having run half the micro-batches through them; all_reduce of the
//      whole gradient buffer over that pair (wte included: ranks 0 and p-1 are a pair).
//                                       sends 2(N-1)/N·4Ψ_r = 4Ψ_r bytes (N = 2)
//   4. AdamW on this rank's local parameters only.
//   5. the global mean loss, summed from the last stage (MetricsReducer: not in CommStats), and
//      every rank's spans gathered on rank 0 (span_gather.h), wall-clock and logical. Steps 1
//      and 5 are bookkeeping: they run on duplicate() groups of pp, so pp's CommStats show the
//      schedule's bytes only.
//
// Traffic per rank and step: e·b·T·C bytes per send_forward and per send_backward of its
// schedule (m·v of each, minus the ends of the pipe; e = 4, or 2 under mixed precision), plus
// 4VC on the two embedding ranks.
//
// Mixed precision (--precision bf16 / fp16, common/train/mixed_precision.h): the parameters are
// the 16-bit working copy (2Ψ_r), the activations and the p2p messages 16-bit, AdamW keeps the
// fp32 master copy with m and v (12Ψ_r). The gradients are NOT 16-bit: every micro-batch adds
// into the buffer, and a 16-bit sum rounds at each of the m additions (bf16 keeps 8 bits of
// mantissa: a micro-batch's contribution under 2^-9 of the running sum is lost outright), so the
// buffer is fp32 (4Ψ_r) and the tied wte's all_reduce stays fp32 — Megatron-LM's "main_grad"
// (its bf16 runs accumulate and all-reduce gradients in fp32), 2 + 4 + 12 = 18 bytes per
// parameter. fp16 scales the loss by S (the executor's loss multiplier) and agrees over pp
// whether any stage's owned gradient overflowed: every stage skips the same step.
//
// At the end of training (finish(), which train_main calls once, after the report table), rank 0
// prints the headline: the ASCII timeline of the last step as EXECUTED on the logical clock
// (logical_clock.h: F = 1, B = 2, recvs waiting for the logical time their message carried)
// and its bubble fraction next to the paper's formula; then the same step on the wall clock,
// labelled as such (ranks outnumber cores here, so wall-clock idle time is not the bubble); and
// writes the Chrome trace (wall clock) of the recorded steps when a trace path was given.
//
// Glossary: p pipeline stages (= ranks), m micro-batches, v chunks per rank, B global batch,
// b = B/m, T sequence length, C channels, V vocab, Ψ_r parameters held by rank r.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/optim/grad_clip.h"
#include "common/pipeline/executor.h"
#include "common/pipeline/gpt_partition.h"
#include "common/pipeline/schedule.h"
#include "common/pipeline/simulator.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

class PipelineStrategy : public MixedPrecisionStrategy {
 public:
  /// Collective over `pp` (keeps a reference: `pp` must outlive it). Fails on every rank with one line (all_ranks_ok, exit 2) when the
  /// schedule's p differs from pp.size(), the layers do not divide into p·v virtual stages, or
  /// the simulator rejects the schedule. Every rank initialises the full model from `seed` and
  /// keeps its part. trace_path: where finish() writes the Chrome trace ("" = none).
  /// clock_costs: the executor's logical clock (F = 1, B = 2 unless a stage's paper counts
  /// otherwise; Chimera's F = B = 1). mp: the run's precision (fp32 by default; 16-bit needs a
  /// model storing its activations in that dtype, else std::invalid_argument). step_group: the
  /// ranks that together own the whole gradient, over which fp16's overflow skip is agreed and
  /// --clip_grad's squares are summed (nullptr: pp; hybrid_3d: the world, its pipelines' stages
  /// sliced over tp and sharded over dp). Collective over it as well as over pp.
  PipelineStrategy(const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed,
                   Schedule schedule, std::string trace_path = "",
                   LogicalCosts clock_costs = LogicalCosts{}, MixedPrecisionConfig mp = {},
                   ProcessGroup* step_group = nullptr);

  /// The whole batch on every rank (pipeline ranks split layers, not data).
  BatchSlice batch_slice(int global_batch) const override { return {0, global_batch}; }
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Memory (parameters, gradients, optimizer state, activations per micro-batch) and bytes
  /// sent, next to their closed forms.
  std::vector<ReportRow> report() const override;
  /// Rank 0 prints the last step's executed (logical) timeline and bubble next to the formula,
  /// then the wall-clock timeline and its activation peak, and writes the trace when a trace
  /// path was given.
  void finish() override;

  /// The paper's bubble fraction for this schedule, printed by finish() next to the executed
  /// one: `value`, and `text` such as "(p-1)/(m+p-1)". Set by each stage's factory.
  void set_bubble_formula(double value, std::string text) {
    formula_bubble_ = value, formula_text_ = std::move(text);
  }

  const Schedule& schedule() const { return schedule_; }
  const GPTPartition& partition() const { return *part_; }
  /// The schedule replayed with unit costs (F = B = 1, W = B-input = 1/2).
  const SimResult& simulated() const { return sim_; }
  /// This rank's measurements of the last step.
  const ExecutorStats& last_stats() const { return exec_->stats(); }
  /// Rank 0: every rank's spans of the last step, seconds from rank 0's t0. Empty elsewhere.
  const std::vector<Span>& last_step_spans() const { return last_spans_; }
  /// Rank 0: bubble fraction of the last step's wall-clock spans (timeline.h's
  /// bubble_fraction). Not the schedule's bubble when ranks share cores (see finish()).
  double measured_bubble_fraction() const;
  /// Rank 0: every rank's logical spans of the last step (ExecutorStats::logical_spans), in
  /// logical units. Empty elsewhere.
  const std::vector<Span>& last_logical_spans() const { return last_logical_; }
  /// Rank 0: bubble fraction of the last step's executed timeline, Σ_r (T - busy_r) / (p·T)
  /// over last_logical_spans() (timeline.h's bubble_fraction, the simulator's definition).
  double executed_bubble_fraction() const;
  /// Rank 0: makespan T of the last step's executed timeline, logical units (F = 1).
  double executed_makespan() const;
  /// Bytes this rank sent in the last step (pipeline and embedding groups).
  double last_step_bytes() const { return last_step_bytes_; }
  /// Closed form of last_step_bytes(): this rank's sends in the schedule · e·bTC + 4VC on the
  /// embedding ranks (e: bytes per activation element).
  double expected_bytes_per_step(int global_batch, int T) const;
  /// Closed form of ExecutorStats::stored_per_forward, the activations one (micro-batch, chunk)
  /// keeps for its backward: per block a BlockCache of b·T·(15C + H·T + 4) floats (ln1 C, qkv
  /// 3C, att H·T, atty C, res1 C, ln2 C, fch 4C, fch_gelu 4C, four LayerNorm statistics) plus
  /// its input x_j (C):  4·b·T·k·(16C + H·T + 4) bytes, k = L/(p·v) blocks per chunk, in fp32;
  /// b·T·k·(2(16C + H·T) + 16) with 16-bit activations (the statistics stay fp32).
  double expected_activation_bytes(int global_batch, int T) const;

 protected:  // PipeDream-2BW (stages/pipedream_2bw) runs its own step on the same state
  /// Whether this rank's segment `s` is the one copy of its elements that counts: not the last
  /// stage's wte copy, and under Chimera only the down pipeline's chunk (the up chunks are the
  /// pair's replicas). Over all ranks the owned segments tile [0, Ψ) once: the state a
  /// checkpoint gathers, and the squares --clip_grad's norm sums.
  bool owns(const ParamSegment& s) const;
  /// Step 3: the tied wte's gradient in `grads` (this rank's layout) summed over the embedding
  /// group {first rank, last rank}; nothing elsewhere. Collective over that group.
  void all_reduce_tied_wte(Tensor& grads);
  /// Step 5's wall-clock half: every rank's `spans` (seconds from its own `t0`) to rank 0, kept
  /// as the last step's spans (from rank 0's t0) and appended to the trace. Collective over pp.
  void record_wall_spans(const std::vector<Span>& spans, double t0);
  /// Rank 0: writes the Chrome trace and says where, when a trace path was given.
  void write_trace_if_asked() const;
  /// get_state's gather: for each (local, full) pair, every rank's owned segments of its local
  /// buffer (GPTPartition layout; an f32 tensor on any device) into their places in the whole
  /// model's host buffer `full` (the model's layout: Ψ floats), on every rank. From a device
  /// each owned segment comes down once (to_host), then the gather runs on host buffers.
  /// Collective over pp.
  void gather_stages(std::initializer_list<std::pair<const Tensor*, float*>> states);
  /// set_state's copy: for each (full, local) pair, this rank's segments (the wte copy included)
  /// of the whole model's host buffer into its local tensor (any device: from_host). Local, no
  /// communication.
  void scatter_stages(std::initializer_list<std::pair<const float*, const Tensor*>> states) const;
  /// The parameters from the whole model's host buffer `full` (Ψ fp32): this rank's segments
  /// into params_, and under mixed precision into AdamW's master copy, params_ rounded from it.
  void set_params(const float* full);
  /// This rank's owned segments (owns()) of `grads` (local layout): the gradient the norm and
  /// fp16's overflow check read.
  std::vector<Tensor> owned_parts(const Tensor& grads) const;
  /// Closed form of the bytes a range of this rank's actions sends, with `wte_all_reduces` tied
  /// embedding all_reduces: sends·e·bTC + wte_all_reduces·4VC on the embedding ranks, b = B over
  /// one step's micro-batches, e bytes per activation element.
  double sent_bytes(std::vector<Action>::const_iterator begin,
                    std::vector<Action>::const_iterator end, int wte_all_reduces,
                    int global_batch, int T) const;

  const GPT& model_;
  ProcessGroup& pp_;
  Schedule schedule_;
  std::string trace_path_;
  std::unique_ptr<GPTPartition> part_;
  SimResult sim_;
  Tensor params_, grads_;  // Ψ_r each, local layout (gpt_partition.h); params 16-bit when mixed
  std::unique_ptr<AdamW> opt_;
  // --clip_grad (MixedPrecisionStrategy::clip_): ‖g‖² summed over pp from each rank's owned
  // segments.
  std::unique_ptr<PipelineExecutor> exec_;
  std::shared_ptr<ProcessGroup> emb_;  // {first rank, last rank}; a 1-rank group elsewhere
  bool in_emb_ = false;
  std::shared_ptr<ProcessGroup> replicas_;  // Chimera: {r, p-1-r}; null otherwise
  MetricsReducer metrics_;
  LogicalCosts clock_costs_;
  int step_micro_batches_ = 1;  // m of one optimizer step (schedule_.m but for a 2BW stream)
  std::shared_ptr<ProcessGroup> book_;  // duplicate of pp: the step's barrier, span gathering
  double last_step_bytes_ = 0;
  int last_B_ = 0, last_T_ = 0;
  std::vector<Span> last_spans_, trace_spans_;  // rank 0
  std::vector<Span> last_logical_;              // rank 0
  double formula_bubble_ = -1;                  // < 0: none given
  std::string formula_text_;
  double first_t0_ = -1;
};

}  // namespace llmp
