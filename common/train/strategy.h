// Strategy: what a stage is, seen from the shared training loop (common/train/train_main.h).
//
// A stage owns the model states (parameters, gradients, optimizer state) laid out however its
// technique wants (replicated, sharded, split into pipeline stages) and turns one global batch
// into one optimizer step. The loop around it (data, logging, evaluation, checkpoints, the final
// memory/communication table) is the same for every stage, which is what lets tests run any
// stage against the single-rank baseline on the same global batch.
//
// Glossary: B global batch (sequences), T sequence length, N ranks, Ψ parameter count.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/data/sampler.h"  // BatchSlice
#include "common/nn/gpt.h"
#include "common/plan/memory_planner.h"

namespace llmp {

/// A row of the end-of-run report: something measured next to its closed form.
struct ReportRow {
  std::string what;      ///< "parameters", "gradients", "optimizer state", "sent per step"
  double measured = 0;   ///< bytes (FLOPs when `flops`)
  double formula = 0;    ///< bytes (FLOPs when `flops`)
  std::string formula_text;  ///< e.g. "4Ψ", "8⌈Ψ/N⌉", "2(N-1)/N·4Ψ"
  bool flops = false;        ///< measured and formula count FLOPs, not bytes
  bool count = false;        ///< measured and formula count operations (collective calls)
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  /// The slice of a global batch of B sequences this rank reads (data parallel: its 1/N).
  virtual BatchSlice batch_slice(int global_batch) const = 0;

  /// One optimizer step t (1-based) on the global batch, of which this rank holds
  /// `slice.num_seqs` sequences: tokens and targets (count, T). Returns the mean loss of the global
  /// batch (nats/token), the same on every rank.
  virtual double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                            int64_t step) = 0;

  /// Mean loss of a global batch without training (validation), the same on every rank.
  virtual double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                           int T) = 0;

  /// Collective. Full model state on every rank: params, Adam m and v (Ψ floats each).
  virtual void get_state(float* params, float* exp_avg, float* exp_avg_sq) = 0;
  /// Collective. Takes the full model state (the same on every rank) and keeps its part.
  virtual void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) = 0;

  /// What a checkpoint records about the run besides the Ψ-sized state, as metadata strings
  /// (common/train/checkpoint_io.h): the precision ("precision": "bf16") and, for fp16, the loss
  /// scaler's state (MixedPrecision::checkpoint_state). The same on every rank. Default: nothing
  /// (the checkpoint then records "precision": "fp32").
  virtual std::map<std::string, std::string> extra_state() const { return {}; }
  /// Not collective (no communication; every rank calls it with the same metadata). Restores
  /// what extra_state wrote from a checkpoint's whole metadata (keys may be absent: older or
  /// foreign files), after set_state. Returns one log line ("" for none) saying what was
  /// restored or not. Throws std::invalid_argument naming a key
  /// and its value. Default: nothing.
  virtual std::string set_extra_state(const std::map<std::string, std::string>& metadata) {
    (void)metadata;
    return "";
  }

  /// This rank's measured bytes next to the closed forms (memory after a step, and bytes sent
  /// during the last step).
  virtual std::vector<ReportRow> report() const = 0;

  /// Whether report() carries the rows of --recompute itself (the recomputed forward FLOPs, the
  /// activations kept per block). False (the default): the shared trainer appends them from
  /// common/train/recompute_report.h, whose closed forms are the whole-sequence walk's; a stage
  /// whose recomputation runs other arithmetic (context parallelism's attention cores) says
  /// true and reports its own.
  virtual bool reports_recomputation() const { return false; }

  /// What the progress line adds after the loss for the last step, e.g. " | loss scale 32768 |
  /// skipped 1" (the fp16 loss scaler's state, the same on every rank). Default: nothing.
  virtual std::string step_note() const { return ""; }

  /// Collective. Called once after training (after the report table); a stage prints what the
  /// table cannot show (DDP's hidden-communication line, a pipeline's measured timeline) or
  /// writes files (--trace). Default: nothing.
  virtual void finish() {}
};

}  // namespace llmp
