// Equivalence against the single-rank baseline, the check every stage's test runs.
//
// Every rank trains the baseline in-process on the whole global batch (it needs no
// communication), then the stage under test on its slice over the group, for the same number
// of steps from the same seed on the same batches. It compares the per-step losses and the final
// parameters, llm.c's check_tensor style: the largest relative difference
//   max_i |a_i - b_i| / max_i |b_i|      over all Ψ parameters
// is printed by rank 0 and returned, with the tensor where the largest |a_i - b_i| sits.
//
// Why not per tensor: some parameters have an exactly zero true gradient. The key part of
// c_attn.bias adds the same constant to every score of a softmax row, which changes nothing, so
// its computed gradient is rounding noise (~1e-10) whose summation order differs between one rank
// and N. AdamW divides m by √v, turning that noise into updates of size lr in random directions:
// a per-tensor relative difference of such a tensor measures amplified noise (~1e-4 here), not
// the parallel algorithm. It is printed (max_tensor_rel) but not bounded.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

struct EquivalenceConfig {
  std::string preset = "tiny";
  int vocab = 0;   ///< > 0 overrides the preset's V (e.g. 257 makes Ψ indivisible by 3: padding)
  int layers = 0;  ///< > 0 overrides the preset's L (pipelines need L divisible by p·v)
  int heads = 0;   ///< > 0 overrides the preset's H (tensor parallelism needs t | H)
  int channels = 0;  ///< > 0 overrides the preset's C (an odd C makes Ψ odd: see padded_model())
  int ctx = 0;       ///< > 0 overrides the preset's ctx (longer sequences: set T too)
  int steps = 10;
  int global_batch = 12;  ///< divisible by 1, 2, 3 and 4
  int T = 16;
  uint64_t seed = 1234;
  AdamWConfig opt{};
  std::string data = "/usr/share/games/fortunes";
  /// The precision of baseline and stage (fp32 by default). With bf16 / fp16 the parameters
  /// compared are both sides' fp32 master weights (Strategy::get_state).
  MixedPrecisionConfig mp{};
};

struct EquivalenceResult {
  std::vector<double> baseline_losses, losses;
  double max_loss_rel = 0;   ///< max over steps |loss - baseline| / |baseline|
  double max_param_rel = 0;   ///< max |a-b| over all parameters / max |b|
  std::string worst_param;    ///< the tensor holding the largest |a-b|
  double max_tensor_rel = 0;  ///< worst per-tensor relative difference (see above; printed only)
  std::string worst_tensor;
};

using StrategyFactory =
    std::function<std::unique_ptr<Strategy>(const GPT& model, AdamWConfig opt, uint64_t seed)>;

/// The model the harness builds: the preset with the overrides applied.
GPTConfig equivalence_model(const EquivalenceConfig& cfg);

/// cfg with a learning rate of 3e-3 (default 1e-3) and weight decay 0.1 (default 0): baseline and
/// stage both train with them, so a stage that drops --lr or --weight_decay drifts from the
/// baseline by about lr·λ per step, far above the tolerance.
EquivalenceConfig non_default_hyperparameters(EquivalenceConfig cfg = {});

/// A model whose Ψ leaves the most padding there can be at every N in {2, 3, 4}: tiny with
/// C = 35, H = 5 (hs 7) and V = 267 has Ψ = 35·(267 + 16) + 2·(12·35² + 13·35) + 2·35 = 40,285
/// ≡ 1 (mod 12), so ⌈Ψ/N⌉·N - Ψ = 1, 2, 3 padded elements on the last rank at N = 2, 3, 4
/// (N = 2 cannot pad more than one). Its config: cfg with channels, heads and vocab set.
EquivalenceConfig padded_model(EquivalenceConfig cfg = {});

/// Collective over `group` (every rank calls it). Prints one line per step and a summary on
/// rank 0 of the group.
EquivalenceResult run_against_baseline(const StrategyFactory& make, ProcessGroup& group,
                                       const EquivalenceConfig& cfg = {});

/// max_i |a_i - b_i| / max_i |b_i| (0 when both are all zeros).
double max_rel_diff(const float* a, const float* b, int64_t n);

}  // namespace llmp
