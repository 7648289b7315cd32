// Activation recomputation ("gradient checkpointing"): which activations a block's forward keeps
// for its backward, and which the backward makes again.
//
//   none       every block keeps its whole cache (BlockCache) and its input: the most memory,
//              no extra compute.
//   full       a block keeps only its input x_l (the "checkpoint"); right before its backward its
//              forward runs again from x_l (Chen et al. 2016, "Training Deep Nets with Sublinear
//              Memory Cost", §3; Megatron's --recompute-granularity full).
//   full with  only every k-th block's input is kept (blocks j % k == 0, j counted from the
//   every k    first block of the range a rank walks: the whole model, or a pipeline stage's
//              blocks); the backward of a block whose segment was
//              dropped runs the forwards of the segment from its checkpoint again, keeping their
//              caches until their backwards (Chen et al. §4: k = √L gives O(√L) memory for one
//              extra forward; Megatron's --recompute-method block/uniform with
//              --recompute-num-layers).
//   selective  every block keeps its cache but attention's softmax probabilities (B,H,T,T), the
//              one activation that grows with T²; the backward recomputes them from q and k
//              (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
//              Models", §5: most of the memory for a few percent of the compute).
//
// Results are bit-identical to no recomputation: the same kernels run on the same inputs again.
// The policy lives in GPTConfig (as Megatron-Core's TransformerConfig carries
// recompute_granularity), so every stage that walks the model (unit_runner.h) takes it.
//
// Glossary: L layers, l block index, k blocks per checkpointed segment, B batch, T sequence,
// H heads.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/flops.h"

namespace llmp {

/// What a block's forward keeps for its backward (see the file comment).
enum class Recompute { kNone, kFull, kSelective };

/// "none", "full", "selective".
const char* to_string(Recompute r);
/// Inverse of to_string. Throws std::invalid_argument("--recompute 'x' (expected none, full or
/// selective)") otherwise.
Recompute parse_recompute(const std::string& s);

/// What recomputation did in this process (one process is one rank), measured where it happens:
/// the walk (unit_runner.cc) counts the block forwards it runs again, the attention backward
/// (attention.cc) the softmax probabilities it makes again, and both add the FLOPs the product
/// kernels counted meanwhile (kernels/cpu/flops.h). The training loop resets it before each
/// step and reads it after (the report's "recomputed forward FLOPs per step").
struct RecomputeMeter {
  int64_t recomputed_blocks = 0;  ///< block forwards run again (full recomputation)
  int64_t recomputed_probs = 0;   ///< blocks whose softmax probabilities were made again (selective)
  int64_t recomputed_flops = 0;   ///< FLOPs of those recomputations
  /// kActivations bytes the last training forward of a range kept over its blocks (MemoryTracker:
  /// growth over the blocks' forwards), the number of those blocks and the sequences it walked.
  int64_t forward_bytes = 0;
  int forward_blocks = 0, forward_batch = 0;
  /// Bytes of checkpoints copied to the host after their forwards and back before their
  /// recomputations (GPTConfig::cpu_checkpoints), counted by the walk as it copies.
  int64_t checkpoint_bytes_down = 0, checkpoint_bytes_up = 0;
  static RecomputeMeter& instance();
  /// Zeroes the recomputation counts (the forward_* fields are overwritten by each forward).
  void reset() {
    recomputed_blocks = recomputed_probs = recomputed_flops = 0;
    checkpoint_bytes_down = checkpoint_bytes_up = 0;
  }
  /// Activation bytes kept per block by the last training forward (its average over the blocks).
  double bytes_per_block() const {
    return forward_blocks ? static_cast<double>(forward_bytes) / forward_blocks : 0.0;
  }
};

/// Adds the FLOPs the product kernels run while it lives (kernels/cpu/flops.h: their count
/// before and after) to RecomputeMeter::recomputed_flops. Each recomputation declares one around
/// what it runs again: the walk's block forwards (unit_runner.cc, the 2D and 3D walks) and the
/// softmax probabilities made again (attention.cc, common/tp_grid/local_attention.cc).
class CountRecomputedFlops {
 public:
  CountRecomputedFlops() : before_(cpu::flops_done()) {}
  ~CountRecomputedFlops() {
    RecomputeMeter::instance().recomputed_flops += cpu::flops_done() - before_;
  }
  CountRecomputedFlops(const CountRecomputedFlops&) = delete;
  CountRecomputedFlops& operator=(const CountRecomputedFlops&) = delete;

 private:
  int64_t before_;
};

}  // namespace llmp
