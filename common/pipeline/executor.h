// PipelineExecutor: runs any pipeline Schedule (schedule.h) on the GPT, over MPI.
//
// Each rank walks its own action list in order, exactly what the simulator replays:
//
//   recv_forward(i,c)   blocks until stage s-1's activations of micro-batch i arrive (p2p.h)
//   forward(i,c)        x_0 = input (or embed(tokens_i) on virtual stage 0),
//                       x_{j+1} = block_j(x_j) for the chunk's k blocks, keeping every x_j and
//                       BlockCache (kActivations); on the last virtual stage also the head:
//                       loss_i and dy = dloss/dx_k (the fused head of gpt.h), kept for backward.
//                       This is the shared walk (common/nn/unit_runner.h) over the chunk's
//                       range of units, with the rank's local buffers as ParamSource/GradSink
//   send_forward(i,c)   isend of x_k to stage s+1 (never blocks)
//   recv_backward(i,c)  blocks until dL/dx_k arrives from stage s+1
//   backward(i,c)       dx_j from dx_{j+1} through the blocks in reverse, gradients ACCUMULATED
//                       into this rank's gradient buffer; embed_backward on virtual stage 0;
//                       frees the micro-batch's activations
//   backward_input / backward_weight   the same backward split in two (zero bubble,
//                       GPT::block_backward_input/_weight): B sends dx at once, W adds the weight
//                       gradients later
//   send_backward(i,c)  isend of dL/dx_0 to stage s-1
//
// Gradient accumulation over micro-batches is just "+=": each micro-batch's loss is scaled by
// 1/(B·T) (B the GLOBAL batch), so after all m micro-batches the buffer holds the gradient of
// the global mean loss, the same as the baseline's single pass over B sequences. The optimizer
// step, the tied-embedding all_reduce and the loss reduction belong to the caller
// (pipeline_strategy.h); the executor only produces gradients and measurements.
//
// Measured per run: one wall-clock Span per action (seconds from t0), one LOGICAL Span per
// action (logical_clock.h: F = 1, B = 2, zero bubble's B = W = 1, each recv ending at the
// logical time its message carried — the executed timeline the bubble is measured on), the peak
// number of (micro-batch, chunk) pairs holding activations, the MemoryTracker's activation
// peak, and the bytes one forward leaves stored for its backward — which is what lets tests
// check GPipe's m-fold against 1F1B's p-fold activation memory.
//
// Papers: as schedule.h (GPipe, Megatron-LM §2.2, Zero Bubble). Glossary: p pipeline stages,
// m micro-batches, v chunks per rank, k blocks per chunk, s virtual stage, B global batch,
// b = B/m micro-batch size, T sequence length, C channels.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/nn/unit_runner.h"
#include "common/pipeline/gpt_partition.h"
#include "common/pipeline/logical_clock.h"
#include "common/pipeline/p2p.h"
#include "common/pipeline/schedule.h"

namespace llmp {

/// What one run measured on this rank.
struct ExecutorStats {
  std::vector<Span> spans;            ///< one per action, wall clock: seconds since the run's t0
  /// One per action, in the order run, on the logical clock (logical_clock.h): logical units
  /// from the step's start (0). The executed timeline: its bubble is the schedule's as run.
  std::vector<Span> logical_spans;
  int peak_in_flight = 0;             ///< max (micro-batch, chunk) pairs holding activations
  int64_t peak_activation_bytes = 0;  ///< MemoryTracker peak of kActivations during the run
  /// Bytes a (micro-batch, chunk) holds from its forward until its backward: the x_j and
  /// BlockCaches (the output x_k leaves with its send_forward; on the last stage the head's
  /// dy is not counted). Max over the run; "one micro-batch's activations" of the papers.
  int64_t stored_per_forward = 0;
};

class PipelineExecutor {
 public:
  /// `schedule` must be valid (simulate() accepted it) and match pp.size() == p and the
  /// partition's p and v. The references must outlive the executor. Collective over `pp` (it
  /// makes the duplicate() the logical times travel on).
  /// `clock_costs`: the logical clock's op costs (F = 1, B = 2 by default; Chimera's stage uses
  /// the paper's F = B = 1).
  PipelineExecutor(const GPT& model, const GPTPartition& part, ProcessGroup& pp,
                   const Schedule& schedule, LogicalCosts clock_costs = LogicalCosts{});

  /// One step's forwards and backwards over the global batch of B sequences, cut into m
  /// micro-batches of b = B/m. params/grads: this rank's local buffers (GPTPartition layout);
  /// params f32, or the 16-bit working copy of mixed precision (each unit widened as a step
  /// reads it, unit_runner.h FlatParams); grads (fp32) += the gradient of the global mean loss. tokens/targets (B,T): the whole batch (only
  /// virtual stage 0 reads tokens, only the last reads targets). t0: the wall_seconds() that spans
  /// count from. Returns Σ_i loss_i·b·T/(B·T) over micro-batches on the last stage's rank, else 0.
  double run(const Tensor& params, float* grads, const int32_t* tokens, const int32_t* targets,
             int B, int T, double t0);
  /// The same with the gradients going to `grads` instead of a local buffer: the walk calls
  /// grads.get(u) for unit u's buffer (unit 0 on a rank holding only the wte copy: that copy,
  /// V·C/t elements) and grads.ready(u) when a micro-batch's backward has made it final
  /// (stages/hybrid_3d's ZeRO-2 reduce-scatters it there, every micro-batch).
  double run(const Tensor& params, GradSink& grads, const int32_t* tokens,
             const int32_t* targets, int B, int T, double t0);

  /// Forward only (validation), micro-batch by micro-batch through the virtual stages of
  /// pipeline 0 in order, in `micro_batches` micro-batches (0: the schedule's m). Same return
  /// convention as run().
  double forward_only(const Tensor& params, const int32_t* tokens, const int32_t* targets, int B,
                      int T, int micro_batches = 0);

  /// What each batch of a flush-free stream reads (PipeDream-2BW, stages/pipedream_2bw): the
  /// stream's micro-batch i belongs to batch i / m_batch, and reads that batch's weight version,
  /// gradient buffer and (B,T) tokens and targets.
  struct StreamBatches {
    /// The weight version batch `batch` reads: this rank's local buffer (f32, or 16-bit widened
    /// unit by unit under mixed precision), alive until the segment returns.
    std::function<const Tensor&(int batch)> params;
    std::function<float*(int batch)> grads;
    std::function<const int32_t*(int batch)> tokens;
    std::function<const int32_t*(int batch)> targets;
  };

  /// Runs actions[begin, end) of a flush-free stream: a schedule whose micro-batches are the
  /// concatenated micro-batches of successive batches (m_batch each, b = B/m_batch sequences),
  /// run without a flush between batches, so one call (a segment) may hold the backwards of
  /// the previous batch and the forwards of the next. Tapes of micro-batches whose backward
  /// lies in a later segment are kept; the logical clock runs on from the previous segment
  /// (the stream's first call starts it at 0); sends are not waited for (their receivers may
  /// take them in their own next segment). The executor's schedule must be the stream's (its
  /// message tags). Returns the losses of the forwards run here on a last-stage rank, else 0.
  double run_segment(const std::vector<Action>& actions, size_t begin, size_t end, int m_batch,
                     int B, int T, const StreamBatches& io, double t0);
  /// The end of a stream: waits for the outstanding sends and drops the tapes.
  void finish_stream();

  const ExecutorStats& stats() const { return stats_; }

  /// The batch whose mean loss the gradients are of: every micro-batch's loss is scaled by
  /// 1/(B_loss·T). 0 (the default): the B each run is given. A data-parallel replica of a
  /// pipeline runs its share B/dp of a global batch B and passes B here, so that summing the
  /// replicas' gradients gives the gradient of the global mean loss (stages/hybrid_3d).
  void set_loss_batch(int B_loss) { loss_batch_ = B_loss; }
  /// Mixed precision's loss scale S (fp16's, common/optim/loss_scaler.h; 1 otherwise): the next
  /// runs scale every micro-batch's loss by S/(B·T) before its backward (Micikevicius et al.
  /// 2018 §3.2), so the gradients and the returned loss come out S times too; the caller
  /// unscales both. forward_only is not scaled.
  void set_loss_multiplier(float S) { loss_multiplier_ = S; }

 private:
  /// One action of the rank's list; tokens/targets point at its micro-batch's rows.
  void execute(const Action& a, UnitRunner& runner, const int32_t* tokens, const int32_t* targets,
               double t0, double* loss);
  /// Per-run bookkeeping: micro-batch size, loss scale 1/(B·T), tapes (num_tapes > 0: fresh
  /// ones), stats and activation peak; the logical clock and in-flight count when reset_clock.
  void begin_run(int b, int B, int T, size_t num_tapes, bool reset_clock);
  void end_run();
  /// The chunk's range of units (a virtual stage) for the walk.
  UnitRange range(int chunk) const;
  /// The tape of a (micro-batch, chunk): its activations between its forward and its backward.
  Tape& tape(const Action& a) { return tapes_[a.microbatch * v_ + a.chunk]; }
  int64_t rows(const Action& a) const { return static_cast<int64_t>(a.microbatch) * b_ * T_; }

  const GPT& model_;
  const GPTPartition& part_;
  const Schedule& schedule_;
  std::shared_ptr<ProcessGroup> clock_group_;  // duplicate of pp: the messages' logical times
  PipeLink link_;
  LogicalClock clock_;
  int rank_, v_;
  // Per run:
  int b_ = 0, T_ = 0;
  int loss_batch_ = 0;  // set_loss_batch (0: the run's B)
  float loss_multiplier_ = 1;  // set_loss_multiplier
  float scale_ = 0;
  std::vector<Tape> tapes_;  // [microbatch·v + chunk]
  PendingSends pending_;
  int in_flight_ = 0;
  int64_t act_before_ = 0;
  ExecutorStats stats_;
};

}  // namespace llmp
