// PipeDream-2BW: 1F1B without flushes, two weight versions per stage, updates one step stale.
//
// Narayanan et al. 2021, "Memory-Efficient Pipeline-Parallel DNN Training" (ICML), §3.1. 1F1B
// (stages/1f1b) flushes the pipe at every optimizer step: the last micro-batches' backwards
// drain it, then the next batch fills it again, and p-1 of every m+p-1 slots of a rank are
// idle. PipeDream-2BW never flushes: batch t+1's forwards start while batch t's last backwards
// are still coming back. The stream of micro-batches is ONE 1F1B schedule over all the run's
// micro-batches (batch t is micro-batches t·m .. t·m+m-1), cut into one segment per step:
//
//   rank r of p, warm-up w = p-r-1:   segment t = F(t·m+i) B(t·m+i-w) for i = 0..m-1
//
// so segment t holds the forwards of batch t, the last w backwards of batch t-1 and the first
// m-w backwards of batch t. In the steady state no rank is ever idle; the pipe fills once at the
// start of the run and drains once at its end.
//
// Which weights? A micro-batch's backward must use the weights its forward used. Every
// micro-batch of batch t uses the same version, W(t-1); the gradient of batch t is applied when
// it is complete, at the end of segment t+1 (every rank has then run batch t's backwards):
//
//   g(t) = ∇ f_t(W(t-1))           (summed over batch t's m micro-batches; W(-1) = W(0))
//   W(t+1) = AdamW(W(t), g(t), step t+1)        (Adam's moments take g(t) as they come)
//
// which is the paper's W(t+1) = W(t) - ν·∇f(W(t-1)), with AdamW's update in place of ν·∇f.
// While segment t+1 runs, batch t+1 reads W(t) and batch t's tail reads W(t-1): two weight
// versions per stage, never more (PipeDream keeps up to p; 1F1B one). Each rank also keeps two
// gradient buffers (batch t's is still being completed by the earlier stages' tails when batch
// t+1's begins), so every rank can apply its update at the end of its own segment; the tied
// embedding's gradient is summed over {rank 0, rank p-1} there, as in 1F1B.
//
// Needs m >= p: a rank must finish batch t-1's backwards (its last w) within segment t, before
// batch t+1 starts (w = p-1 < m). It does not reproduce the baseline (the gradient is one step
// stale): the tests check it against a single-rank trainer that applies the same rule.
//
// Mixed precision (--precision bf16): both versions are 16-bit (each the rounding of the master
// copy when it was made; W(t-1) is a copy of the 16-bit W(t) before the update), the gradients
// fp32 (PipelineStrategy's main_grad), AdamW's fp32 master copy of the newest version with m and
// v: 2·2 + 2·4 + 12 = 24 bytes per parameter. fp16 is refused: its loss scale may change between
// the two segments a batch's backwards are split over.
//
// Glossary: p pipeline stages (ranks), m micro-batches per batch (= per optimizer step), w
// warm-up forwards of a rank, t step (batch), W(t) weight version t, g(t) gradient of batch t,
// F forward, B backward, Ψ_r parameters held by a rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/pipeline/pipeline_strategy.h"

namespace llmp {

/// The first problem with PipeDream-2BW on p stages with m micro-batches, or "":
/// "pipedream_2bw needs m >= p micro-batches (a rank finishes batch t-1 before batch t+1
/// starts): m=2, p=4".
std::string pipedream_2bw_check(int p, int m);

/// "" for fp32 and bf16; for fp16 the one line saying why not: a batch's backwards are split
/// between two segments, and fp16's dynamic loss scale S may change between them (a skipped
/// step halves it), so one gradient would sum micro-batches scaled by two different S.
std::string pipedream_2bw_precision_check(TrainPrecision p);

class PipeDream2BWStrategy : public PipelineStrategy {
 public:
  /// `steps`: how many train_step calls the run makes (the stream's length; the last call
  /// drains the pipe and applies the last two updates). Collective over `pp`. Fails on every
  /// rank with one line when pipedream_2bw_check or pipedream_2bw_precision_check does.
  /// `mp`: fp32, or bf16 (see "Mixed precision" above).
  PipeDream2BWStrategy(const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed, int m,
                       int64_t steps, std::string trace_path = "", MixedPrecisionConfig mp = {});

  /// Segment t of the stream (header comment), then the update W(t) = AdamW(W(t-1), g(t-1))
  /// (from t = 1); on the last call also the drain and W(t+1). Returns the mean loss of batch
  /// t, computed with W(t-1).
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  /// A checkpoint's state becomes BOTH versions: the stream restarts from it as from W(0)
  /// (W(-1) = W(0)), so a resumed run's first step is not stale.
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// With the newest complete version (W(t) after step t; after the last step, W(steps)).
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  /// The report of 1F1B with the two versions and two gradient buffers: parameters 2·p_b·Ψ_r
  /// (p_b = 4, or 2 in bf16), gradients 8Ψ_r; bytes of the last step's segment.
  std::vector<ReportRow> report() const override;
  /// The last steady-state step's executed timeline (logical clock), each rank's idle time in
  /// it (0 in the steady state: no flush), and the paper's rule.
  void finish() override;

  /// Rank 0, after a step: each rank's idle logical time in its last segment — from the end of
  /// its previous segment's last op to the end of this segment's last op, minus its compute.
  const std::vector<double>& segment_idle() const { return segment_idle_; }
  /// Rank 0: segment_idle() of the last step that was neither the first nor the last (the
  /// steady state); empty when the run had fewer than 3 steps.
  const std::vector<double>& steady_idle() const { return steady_idle_; }
  /// Bytes of weight versions this rank holds: 2·p_b·Ψ_r.
  int64_t weight_version_bytes() const;

 private:
  /// Where each action of this rank's stream list belongs: segment t, or `steps_` for the drain.
  void cut_segments();
  /// W(t) = AdamW(W(t-1), g(t-1)) with the tied wte gradient summed first; g's buffer zeroed.
  void apply_update(int batch);
  /// Runs actions [begin, end) of the stream with the batches' versions and buffers.
  double run(size_t begin, size_t end, int B, int T, double t0);

  int m_;
  int64_t steps_;
  std::vector<size_t> cut_;  // segment t = stream actions [cut_[t], cut_[t+1]); drain after
  Tensor older_;             // W(t-1) while params_ holds W(t); 16-bit in bf16, as params_
  Tensor grads2_;            // the second gradient buffer: batch t uses t % 2 ? grads2_ : grads_
  std::vector<int32_t> tokens_[2], targets_[2];  // batch t in [t % 2]
  std::vector<int64_t> step_of_;                 // the train_step `step` of batch t
  int next_ = 0;         // the next segment (= batch) to run
  int current_ = 0;      // the batch whose micro-batches read params_ (the others read older_)
  size_t last_begin_ = 0, last_end_ = 0;  // the last step's actions [begin, end), for report()
  int last_updates_ = 0;                  // and its updates (tied-wte all_reduces)
  std::vector<double> prev_end_;           // rank 0: each rank's logical end of its last segment
  std::vector<double> segment_idle_, steady_idle_;
  std::vector<Span> steady_logical_;  // rank 0: the last steady-state segment's logical spans
};

/// PipeDream-2BW over the ranks of `pp` with m micro-batches and a run of `steps` steps.
std::unique_ptr<PipeDream2BWStrategy> make_pipedream_2bw(const GPT& model, ProcessGroup& pp,
                                                         AdamWConfig opt, uint64_t seed, int m,
                                                         int64_t steps,
                                                         const std::string& trace = "",
                                                         MixedPrecisionConfig mp = {});

}  // namespace llmp
