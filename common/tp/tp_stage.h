// tp_stage_spec: what the tensor_parallel and sequence_parallel stages' main.cc share: the flag
// --tp, the checks that run before any rank starts (and again inside the ranks), and the
// factory of a TensorParallelStrategy.
//
//   int main(int argc, char** argv) {
//     llmp::TpStageOptions o;
//     o.name = "tensor_parallel";  o.sequence_parallel = false;
//     return llmp::train_main(argc, argv, llmp::tp_stage_spec(o));
//   }
//
// The grid is dp 1 × pp 1 × tp t (StageSpec::grid): every rank of the world is one
// tensor-parallel rank, so --tp t (default: the world size) must equal --world_size. Checked as
// one line "error: ..." and exit 2, before launch and inside the ranks:
//   - "dp 1 × pp 1 × tp 2 = 2 does not match the world size 4" (train_main's grid check);
//   - "tensor-parallel size 3 (rank 0) does not divide H=4, 4C=512 and V=256" (GPTLayout);
//   - sequence parallelism: "sequence length T=64 is not divisible by tp 3".
//
// Glossary: t tensor-parallel ranks, H heads, C channels, V vocab, T sequence (the preset's ctx).
#pragma once

#include <string>

#include "common/train/train_main.h"

namespace llmp {

struct TpStageOptions {
  std::string name;         ///< "tensor_parallel" or "sequence_parallel"
  std::string summary;      ///< one line for --help
  bool sequence_parallel = false;
  int default_world_size = 4;
  /// --device cuda: the strategy's model, state and buffers on the device (any --precision).
  bool supports_device = false;
};

/// The first problem with cfg's model on t = `tp` (0: the world size) tensor-parallel ranks, as
/// one line, or "" when fine (the grid against the world size is train_main's check). Pure: used
/// before launch, inside the ranks and by the tests.
std::string tp_config_error(const TrainConfig& cfg, int tp, bool sequence_parallel);

/// A StageSpec whose flags, validation and factory follow `o`.
StageSpec tp_stage_spec(const TpStageOptions& o);

}  // namespace llmp
