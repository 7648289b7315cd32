// The side-by-side comparison `bazel run //stages/mixed_precision:train` prints: the same model,
// seed and batches trained four times, as four ordinary runs of this binary (train_main, one
// rank), each writing what it measured to a JSON file (--summary_json, precision_strategy.h):
//
//   fp32                          the reference: 4-byte parameters, gradients, Adam state (K = 8)
//   bf16                          fp32's 8 exponent bits, 8 significand bits: no loss scale
//   fp16, dynamic loss scale      5 exponent bits: S starts at --initial_loss_scale, halves and
//                                 skips the step on inf/nan, doubles after --loss_scale_window
//   fp16, --loss_scale 1          no scaling: small gradients flush to zero (the underflow column)
//
// The driver re-executes /proc/self/exe with the user's flags (the loss-scaler flags go to the
// dynamic fp16 run only: the others refuse them) plus --precision, --loss_scale and
// --summary_json, waits for each, reads the four files with nlohmann-json and prints one table.
// A run that fails has already printed its one "error: ..." line: the driver stops and exits
// with that run's status.
//
// Glossary: S loss scale, Ψ parameter count.
#pragma once

#include <string>
#include <vector>

#include "stages/mixed_precision/precision_strategy.h"

namespace llmp {

/// One of the four runs: its label in the table and the flags that make it.
struct PrecisionRun {
  std::string label;               ///< "fp16, S = 1"
  std::vector<std::string> flags;  ///< {"--precision", "fp16", "--loss_scale", "1"}
  bool takes_scaler_flags = false; ///< the dynamic fp16 run gets --initial_loss_scale etc.
};

/// fp32, bf16, fp16 with dynamic scaling, fp16 with --loss_scale 1.
std::vector<PrecisionRun> precision_runs();

/// The table: one row per run (label, train and validation loss, bytes of parameters, gradients
/// and optimizer state, skipped steps, final S, underflow %, tokens/s), then the bytes per
/// parameter each run measured (bytes / Ψ, so fp32 reads 4 + 4 + 8 and 16-bit 2 + 2 + 12).
std::string side_by_side_table(const std::vector<PrecisionRun>& runs,
                               const std::vector<PrecisionSummary>& results);

/// The whole driver (main.cc calls it when --summary_json is absent). argv: the user's command
/// line. Returns the exit status: 0, a failed run's status, or 2 after one "error: ..." line for
/// a flag the driver sets itself (--precision, --loss_scale).
int run_side_by_side(int argc, char** argv);

/// Whether argv holds --summary_json (then this process is one of the four runs).
bool is_single_run(int argc, char** argv);

}  // namespace llmp
