// Naive data parallelism: N full replicas, one all_reduce of the whole gradient after backward.
//
// The starting point of the data-parallel family (Li et al. 2020, "PyTorch Distributed:
// Experiences on Accelerating Data Parallel Training", VLDB, §3.2, the naive solution; ZeRO,
// Rajbhandari et al. 2020, §3 for the memory it wastes). Every rank holds the whole model: its
// parameters (4Ψ bytes fp32), gradients (4Ψ) and AdamW's m and v (8Ψ). One step:
//
//   1. forward and backward on this rank's B/N sequences, loss scaled by 1/(B·T) so that the SUM
//      over ranks of the local gradients is the gradient of the global mean loss;
//   2. after the WHOLE backward: one blocking all_reduce (sum) of the flat Ψ-element gradient
//      buffer;                                                            sends 2(N-1)/N·4Ψ
//   3. every rank runs the same AdamW update over all Ψ parameters, so the replicas stay equal.
//
// What is naive about it: nothing overlaps (the network idles during backward, the CPU idles
// during the all_reduce; stages/ddp fixes that with buckets), and every rank stores and updates
// the same 16Ψ bytes of model state, N copies of one thing (ZeRO shards them: stages/zero1..3).
//
// With --precision bf16 / fp16 (common/train/mixed_precision.h): 16-bit parameters and gradients
// (2Ψ + 2Ψ) and AdamW's fp32 master copy with m and v (12Ψ): K = 12. The all_reduce then sums the
// 16-bit gradients themselves, 2 bytes per element (each pairwise addition in fp32, rounded):
//                                                                         sends 2(N-1)/N·2Ψ
// and fp16's overflow check (inf/nan in the summed gradients, the step skipped) is agreed over
// the group, so every rank skips the same step.
//
// Glossary: B global batch (sequences), T sequence length, N ranks, Ψ parameter count,
// K optimizer bytes per parameter (8 in fp32: m and v; 12 mixed: master, m and v).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

class NaiveDPStrategy : public MixedPrecisionStrategy {
 public:
  /// Collective over `dp`. Every rank initialises the same parameters from `seed`
  /// (GPT::init_params is a pure function of the seed), so no broadcast is needed. `mp`: the
  /// precision (the model's activation dtype must match it; std::invalid_argument otherwise).
  NaiveDPStrategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
                  MixedPrecisionConfig mp = {});

  /// Rank r reads sequences [r·B/N, (r+1)·B/N). Throws std::invalid_argument when N ∤ B.
  BatchSlice batch_slice(int global_batch) const override;
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Memory rows (4Ψ, 4Ψ, 8Ψ; mixed: 2Ψ, 2Ψ, 12Ψ) and bytes sent in the last step against
  /// 2(N-1)/N·4Ψ (mixed: 2(N-1)/N·2Ψ).
  std::vector<ReportRow> report() const override;
  /// fp16: " | loss scale S | skipped k" on the progress line; "" otherwise.
  /// Prints, on every rank, the mean wall time of the blocking all_reduce (all of it exposed:
  /// nothing runs beside it).
  void finish() override;

  /// Bytes this rank sent during the last train_step (CommStats delta).
  double last_step_bytes() const { return last_step_bytes_; }
  /// Mean milliseconds per step spent in the blocking gradient all_reduce.
  double mean_all_reduce_ms() const { return steps_ ? all_reduce_ms_ / steps_ : 0.0; }
  /// The working copy of the parameters: Ψ elements, f32 or 16-bit.
  const Tensor& params_tensor() const { return params_; }
  /// The gradient buffer after the last step's all_reduce: Ψ elements, f32 or 16-bit.
  const Tensor& grads_tensor() const { return grads_; }

 private:
  const GPT& model_;
  ProcessGroup& dp_;
  Tensor params_;  // Ψ, replicated, in mp_.dtype()
  Tensor grads_;   // Ψ, replicated after the all_reduce, in mp_.dtype()
  AdamW opt_;      // m, v (and the fp32 master weights when 16-bit): Ψ each, replicated
  MetricsReducer metrics_;
  double last_step_bytes_ = 0;
  double all_reduce_ms_ = 0;
  int64_t steps_ = 0;
};

}  // namespace llmp
