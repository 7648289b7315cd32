// hybrid_stage_spec: the hybrid_3d stage's flags (--dp, --pp, --tp, --micro_batches, --chunks,
// --sequence_parallel), the checks that run before any rank starts (and again inside the ranks)
// and the factory of a HybridStrategy. Each check is one line "error: ..." and exit 2:
//   - "dp 2 × pp 2 × tp 2 = 8 does not match the world size 4" (train_main's grid check);
//   - "tensor-parallel size 3 does not divide H=4, 4C=512 and V=256";
//   - "layers 4 not divisible by p·v = 8 (p=4, v=2)";
//   - "global batch 16 is not divisible by dp·m = 12 (dp=2, m=6)";
//   - "sequence length T=64 is not divisible by tp 3 (sequence parallelism)";
//   - "--zero 3 must be 1 or 2 (the ZeRO stage over dp)";
//   - the schedule's own (interleaved 1F1B needs m % p == 0).
//
// Glossary: dp/pp/tp the grid, m micro-batches per replica, v chunks per pipeline rank.
#pragma once

#include <string>

#include "common/train/train_main.h"
#include "stages/hybrid_3d/hybrid_3d.h"

namespace llmp {

/// The grid and pipeline flags of the stage (defaults: dp = pp = tp = 2, m = 4, v = 1, no SP).
struct HybridFlags {
  int dp = 2, pp = 2, tp = 2;
  HybridOptions options;
};

/// The first problem with running cfg's model on the grid and pipeline of `f`, as one line, or
/// "" when fine (the grid's product against the world size is train_main's check). Pure.
std::string hybrid_config_error(const TrainConfig& cfg, const HybridFlags& f);

/// The stage: flags, validation and factory.
StageSpec hybrid_stage_spec();

}  // namespace llmp
