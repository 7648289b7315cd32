// The checks of a run's flags against its stage (StageSpec): train_main runs them all in the
// launching process before any rank starts (validate_before_launch: one line "error: ...", exit
// 2), and the ones a rank cannot skip again inside the ranks, for ranks that mpiexec started
// directly (output paths, --device, --clip_grad: all_ranks_ok there).
#pragma once

#include <string>

#include "common/runtime/flags.h"
#include "common/train/train_main.h"

namespace llmp {

/// The first output path (--save, --trace) that cannot be written, as one line, or "".
std::string output_paths_error(const TrainConfig& cfg);

/// --device cuda: the stage must support it (and --precision bf16/fp16 there, if given), and the
/// binary must have the device's kernels and see a device (unless !check_available: the launcher
/// asks that last, after the stage's own flag checks, so that a refused flag combination reads
/// the same on machines with and without a GPU). One line naming the reason, or "".
std::string device_error(const TrainConfig& cfg, const StageSpec& spec,
                         bool check_available = true);

/// --clip_grad c > 0 on a stage that does not clip: one line naming both, or "".
std::string clip_grad_error(const TrainConfig& cfg, const StageSpec& spec);

/// Everything that can be checked before any rank starts: the grid, the flags (validate), the
/// stage's support of --trace, --precision, --device, --clip_grad, a mixture of experts and
/// --partition_activations, the output paths, the stage's own checks, the device, cores and
/// memory, the corpus and a --load checkpoint. The first problem ends the process with one line
/// (user_error, exit 2); last, a warning when ranks oversubscribe the cores.
void validate_before_launch(const TrainConfig& cfg, const StageSpec& spec);

}  // namespace llmp
