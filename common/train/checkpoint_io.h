// Checkpoints of a training run: the full model state in one safetensors file, whatever stage
// and number of ranks wrote it (a ZeRO run's shards are gathered first), so a run saved by
// zero2 on 4 ranks resumes on the baseline or on 2 ranks.
//
// Tensors (all F32, GPT-2 names, weights stored (in, out) row-major; see common/nn/gpt.h):
//   <name>                          the parameter, e.g. "h.0.attn.c_attn.weight" (C, 3C)
//   optimizer.exp_avg.<name>        AdamW's first moment m, same shape
//   optimizer.exp_avg_sq.<name>     AdamW's second moment v, same shape
// Metadata (strings): format "llmp-gpt-v1", model (preset), step (the last step taken), stage.
#pragma once

#include <cstdint>
#include <string>

#include "common/nn/gpt.h"
#include "common/runtime/checkpoint.h"
#include "common/train/strategy.h"

namespace llmp {

/// Reads `path` and checks it holds exactly this model's tensors and metadata. Throws
/// std::runtime_error with one line naming the path and the problem (corrupt file, other
/// model preset, missing tensor, wrong shape, missing or bad step).
Checkpoint read_checkpoint(const std::string& path, const GPT& model);

/// Collective: every rank reads `path` and the strategy keeps its part. Returns the step saved.
int64_t load_into(const std::string& path, const GPT& model, Strategy& strategy);

/// Collective (gathers the full state); the rank with `write` true writes `path` atomically.
void save_from(const std::string& path, const GPT& model, Strategy& strategy, int64_t step,
               const std::string& stage, bool write);

}  // namespace llmp
